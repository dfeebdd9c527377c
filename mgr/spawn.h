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

struct mgr_spawn {
	const char *exec;
	char *const *argv;
	char *const *envp;
	int keep_fd;   /* an fd the NF keeps open (its region), or -1 */
	bool set_user; /* run as uid/gid below, no supplementary groups */
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
 * Start @p s->exec in its own process group, as its user when set_user
 * (every capability dropped, the bounding set emptied, no_new_privs set: a
 * set-user-ID or file-capability binary gains nothing), with only keep_fd
 * inherited of the manager's close-on-exec fds and no signal handler of
 * the manager's; filter, if given,
 * loaded last, so that it holds from the NF's first instruction on.
 * @return 0 and *pid, or -errno of the step that failed (*step names it).
 */
int mgr_spawn(const struct mgr_spawn *s, pid_t *pid, const char **step);

#endif /* SQUALL_MGR_SPAWN_H */
