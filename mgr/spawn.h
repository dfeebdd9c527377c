/* SPDX-License-Identifier: BSD-3-Clause
 * spawn: start an NF process with the least it needs (issue 16: no NF runs
 * as root). No manager state: the caller says what to run and as whom.
 */
#ifndef SQUALL_MGR_SPAWN_H
#define SQUALL_MGR_SPAWN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct sock_fprog;

/* The NF's region descriptor, the only one past stdio it keeps. */
#define MGR_SPAWN_REGION_FD 3
/* (descriptors are moved through numbers from here up) */
#define MGR_SPAWN_FD_FIRST  16

struct mgr_spawn {
	const char *exec;
	char *const *argv;
	char *const *envp;
	int keep_fd;        /* the NF's region: its MGR_SPAWN_REGION_FD; or -1 */
	int stdin_fd;       /* its stdin (/dev/null) */
	int log_fd;         /* its stdout and stderr (the write end of its log pipe) */
	pid_t parent;       /* the manager: a child whose parent is gone stops */
	uint32_t max_fds;   /* RLIMIT_NOFILE; 0: the manager's */
	uint32_t max_tasks; /* RLIMIT_NPROC (its uid's processes and threads); 0: none */
	bool set_user;      /* run as uid/gid below, no supplementary groups */
	uid_t uid;
	gid_t gid;
	const struct sock_fprog *filter; /* seccomp filter loaded before execve, or NULL */
	uint64_t data_bytes;             /* RLIMIT_DATA; 0: the manager's */
	bool no_core;                    /* RLIMIT_CORE 0: a dump would hold packets */
	/* cgroup.procs files the NF joins (its service's group: mgr/cgroup.c) */
	const int *cgroup_fds;
	unsigned int n_cgroup_fds;
	/* pid, mount, ipc and net namespaces of its own (an isolated NF): a
	 * /proc of its pid namespace, empty /dev/shm, /dev/hugepages and
	 * /run/dpdk, no network but loopback (down) */
	bool namespaces;
};

/*
 * Start @p s->exec in a process group of its own with no controlling
 * terminal, as
 * its user when set_user (every capability dropped, the bounding set
 * emptied, no_new_privs set: a set-user-ID or file-capability binary gains
 * nothing), with stdin, stdout/stderr and the region at fixed numbers and
 * no other descriptor of the manager's, a parent-death signal, and no
 * signal handler of the manager's; filter, if given,
 * loaded last, so that it holds from the NF's first instruction on.
 * @return 0 and *pid, or -errno of the step that failed (*step names it).
 */
int mgr_spawn(const struct mgr_spawn *s, pid_t *pid, const char **step);

#endif /* SQUALL_MGR_SPAWN_H */
