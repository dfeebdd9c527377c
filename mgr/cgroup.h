/* SPDX-License-Identifier: BSD-3-Clause
 * cgroup: a service's NFs together under cpu, memory and pids limits
 * (issue 16), in cgroup v2 where its controllers are, else in cgroup v1's
 * hierarchies. No manager state: the caller names the group and the limits.
 */
#ifndef SQUALL_MGR_CGROUP_H
#define SQUALL_MGR_CGROUP_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

#include "config.h"

enum mgr_cg_ctrl { MGR_CG_CPU, MGR_CG_MEMORY, MGR_CG_PIDS, MGR_CG_N };

struct mgr_cgroup {
	int version;                     /* 2, or 1: a hierarchy per controller */
	char dir[MGR_CG_N][PATH_MAX];    /* the group's directory per controller (v2: one) */
	char parent[MGR_CG_N][PATH_MAX]; /* squall-NAME, removed with its last group */
	int procs_fd[MGR_CG_N];          /* its cgroup.procs, for the NF's "0"; -1 */
	struct sq_cfg_cgroup set;        /* the limits written */
	char name[SQ_CFG_NAME_LEN];      /* the service it is for */
};

/* Where the cgroup file systems are and what this process is in: the host's
 * (/sys/fs/cgroup, /proc/self/cgroup), or a test's copy of their layout. */
struct mgr_cg_root {
	const char *fs;   /* cgroup2 at fs, or at fs/unified, or v1 at fs/CTRL */
	const char *self; /* the /proc/self/cgroup to read */
};

/*
 * Make (or take over, left by a manager that died) the group MGR/SERVICE
 * under this process's own cgroup of each controller, and open its
 * cgroup.procs files. cgroup v2 when its cgroup.controllers (at fs or
 * fs/unified) lists cpu, memory and pids; else v1.
 * @return 0, or -errno with a sentence in err.
 */
int mgr_cgroup_open(struct mgr_cgroup *cg, const struct mgr_cg_root *root, const char *mgr,
		    const char *service, char *err, size_t err_len);

/* Write every limit (an unset one as "no limit", so a change back to 0
 * lifts it). @return 0, or -errno with the file in err. */
int mgr_cgroup_limit(struct mgr_cgroup *cg, const struct sq_cfg_cgroup *lim, char *err,
		     size_t err_len);

/* Move a running process into the group (a group made while its
 * service's NFs run). @return 0, or -errno. */
int mgr_cgroup_attach(const struct mgr_cgroup *cg, pid_t pid);

/* Close the files and remove the group and, once empty, MGR's: the kernel
 * refuses while a process is still in it (-EBUSY, left as it is). */
int mgr_cgroup_close(struct mgr_cgroup *cg);

/* What the kernel counted for the group; -1 where it cannot be read. */
struct mgr_cg_stats {
	long long cpu_throttled;    /* periods its NFs were stopped at cpu.max */
	long long cpu_throttled_us; /* time they were stopped */
	long long memory_bytes;     /* charged now */
	long long memory_max_hits;  /* allocations that met memory.max (v1: failcnt) */
	long long oom_kills;        /* NFs the OOM killer took */
	long long pids;             /* processes and threads now */
	long long pids_max_hits;    /* forks and threads refused at pids.max */
};

void mgr_cgroup_stats(const struct mgr_cgroup *cg, struct mgr_cg_stats *st);

static inline bool
mgr_cgroup_wanted(const struct sq_cfg_cgroup *lim)
{
	return lim->cpu_max_pct != 0 || lim->cpu_weight != 0 || lim->memory_max_mb != 0 ||
	       lim->pids_max != 0;
}

#endif /* SQUALL_MGR_CGROUP_H */
