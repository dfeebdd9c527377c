/* SPDX-License-Identifier: BSD-3-Clause
 * mgr/cgroup.c on copies of the cgroup file systems' layout in a temporary
 * directory: cgroup v2 (unified, and hybrid under unified/), which this
 * project's CI machine does not offer the controllers of, and cgroup v1
 * (which its integration test, test_cgroups.py, runs on the real kernel).
 * The files written are the kernel's names with the kernel's values.
 */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"

#include "check.h"

static char root[64];

static void
put(const char *rel, const char *text)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "w");
	if (f == NULL) {
		perror(path);
		exit(1);
	}
	fputs(text, f);
	fclose(f);
}

static void
dir(const char *rel)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	mkdir(path, 0755);
}

/* The file's text, without its trailing newline; "" if there is none. */
static const char *
got(const char *dir_path, const char *file)
{
	static char buf[256];
	char path[PATH_MAX * 2];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/%s", dir_path, file);
	f = fopen(path, "r");
	if (f == NULL)
		return "";
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return buf;
}

static int
rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

static void
fresh(void)
{
	if (root[0] != '\0')
		nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	snprintf(root, sizeof(root), "/tmp/sq-cgroup-XXXXXX");
	if (mkdtemp(root) == NULL) {
		perror("mkdtemp");
		exit(1);
	}
	dir("fs");
}

static const struct sq_cfg_cgroup limits = {
	.cpu_max_pct = 50, .cpu_weight = 300, .memory_max_mb = 64, .pids_max = 8};

static void
test_v2(const char *mount_rel)
{
	char fs[PATH_MAX], self[PATH_MAX], want[PATH_MAX * 2], err[512], ctl[PATH_MAX];
	struct mgr_cgroup cg;
	struct mgr_cg_stats st;

	fresh();
	snprintf(ctl, sizeof(ctl), "%s/cgroup.controllers", mount_rel);
	if (strcmp(mount_rel, "fs") != 0)
		dir(mount_rel);
	put(ctl, "cpuset cpu io memory pids\n");
	snprintf(ctl, sizeof(ctl), "%s/mgr.scope", mount_rel);
	dir(ctl);
	put("self", "0::/mgr.scope\n");
	snprintf(fs, sizeof(fs), "%s/fs", root);
	snprintf(self, sizeof(self), "%s/self", root);
	struct mgr_cg_root r = {fs, self};

	CHECK(mgr_cgroup_open(&cg, &r, "m", "svc", err, sizeof(err)) == 0);
	snprintf(want, sizeof(want), "%s/%s/mgr.scope/squall-m/svc", root, mount_rel);
	CHECK(cg.version == 2);
	for (int i = 0; i < MGR_CG_N; i++)
		CHECK(strcmp(cg.dir[i], want) == 0);
	CHECK(cg.procs_fd[0] >= 0 && cg.procs_fd[1] < 0 && cg.procs_fd[2] < 0);
	/* each level above the group passes the controllers down */
	CHECK(strcmp(got(cg.parent[0], "cgroup.subtree_control"), "+cpu +memory +pids") == 0);
	snprintf(want, sizeof(want), "%s/%s/mgr.scope", root, mount_rel);
	CHECK(strcmp(got(want, "cgroup.subtree_control"), "+cpu +memory +pids") == 0);

	CHECK(mgr_cgroup_limit(&cg, &limits, err, sizeof(err)) == 0);
	CHECK(strcmp(got(cg.dir[0], "cpu.max"), "50000 100000") == 0);
	CHECK(strcmp(got(cg.dir[0], "cpu.weight"), "300") == 0);
	CHECK(strcmp(got(cg.dir[0], "memory.max"), "67108864") == 0);
	CHECK(strcmp(got(cg.dir[0], "pids.max"), "8") == 0);
	CHECK(memcmp(&cg.set, &limits, sizeof(limits)) == 0);
	/* back to none: each file says so, not left as it was */
	CHECK(mgr_cgroup_limit(&cg, &(struct sq_cfg_cgroup){0}, err, sizeof(err)) == 0);
	CHECK(strcmp(got(cg.dir[0], "cpu.max"), "max 100000") == 0);
	CHECK(strcmp(got(cg.dir[0], "cpu.weight"), "100") == 0);
	CHECK(strcmp(got(cg.dir[0], "memory.max"), "max") == 0);
	CHECK(strcmp(got(cg.dir[0], "pids.max"), "max") == 0);

	{
		char rel[64], p[128];

		snprintf(rel, sizeof(rel), "%s/mgr.scope/squall-m/svc/", mount_rel);

		snprintf(p, sizeof(p), "%scpu.stat", rel);
		put(p, "usage_usec 10\nnr_periods 9\nnr_throttled 5\nthrottled_usec 700\n");
		snprintf(p, sizeof(p), "%smemory.events", rel);
		put(p, "low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n");
		snprintf(p, sizeof(p), "%smemory.current", rel);
		put(p, "4096\n");
		snprintf(p, sizeof(p), "%spids.current", rel);
		put(p, "4\n");
		snprintf(p, sizeof(p), "%spids.events", rel);
		put(p, "max 6\n");
	}
	mgr_cgroup_stats(&cg, &st);
	CHECK(st.cpu_throttled == 5 && st.cpu_throttled_us == 700);
	CHECK(st.memory_max_hits == 3 && st.oom_kills == 2 && st.memory_bytes == 4096);
	CHECK(st.pids == 4 && st.pids_max_hits == 6);
	/* (the copy's files keep its directories; the kernel's would go) */
	mgr_cgroup_close(&cg);
	CHECK(cg.procs_fd[0] < 0);
}

static void
test_v1(void)
{
	char fs[PATH_MAX], self[PATH_MAX], want[PATH_MAX * 2], err[512];
	struct mgr_cgroup cg;
	struct mgr_cg_stats st;

	fresh();
	dir("fs/cpu,cpuacct");
	dir("fs/cpu,cpuacct/a");
	dir("fs/memory");
	dir("fs/memory/b");
	dir("fs/pids");
	/* cgroup.controllers of an empty v2 mount: not taken */
	dir("fs/unified");
	put("fs/unified/cgroup.controllers", "\n");
	put("self", "9:name=systemd:/\n8:pids:/\n4:memory:/b\n2:cpu,cpuacct:/a\n0::/\n");
	snprintf(fs, sizeof(fs), "%s/fs", root);
	snprintf(self, sizeof(self), "%s/self", root);
	struct mgr_cg_root r = {fs, self};

	CHECK(mgr_cgroup_open(&cg, &r, "m", "svc", err, sizeof(err)) == 0);
	CHECK(cg.version == 1);
	snprintf(want, sizeof(want), "%s/fs/cpu,cpuacct/a/squall-m/svc", root);
	CHECK(strcmp(cg.dir[MGR_CG_CPU], want) == 0);
	snprintf(want, sizeof(want), "%s/fs/memory/b/squall-m/svc", root);
	CHECK(strcmp(cg.dir[MGR_CG_MEMORY], want) == 0);
	snprintf(want, sizeof(want), "%s/fs/pids/squall-m/svc", root);
	CHECK(strcmp(cg.dir[MGR_CG_PIDS], want) == 0);
	CHECK(cg.procs_fd[0] >= 0 && cg.procs_fd[1] >= 0 && cg.procs_fd[2] >= 0);

	CHECK(mgr_cgroup_limit(&cg, &limits, err, sizeof(err)) == 0);
	CHECK(strcmp(got(cg.dir[MGR_CG_CPU], "cpu.cfs_period_us"), "100000") == 0);
	CHECK(strcmp(got(cg.dir[MGR_CG_CPU], "cpu.cfs_quota_us"), "50000") == 0);
	CHECK(strcmp(got(cg.dir[MGR_CG_CPU], "cpu.shares"), "3072") == 0);
	CHECK(strcmp(got(cg.dir[MGR_CG_MEMORY], "memory.limit_in_bytes"), "67108864") == 0);
	CHECK(strcmp(got(cg.dir[MGR_CG_PIDS], "pids.max"), "8") == 0);
	CHECK(mgr_cgroup_limit(&cg, &(struct sq_cfg_cgroup){0}, err, sizeof(err)) == 0);
	CHECK(strcmp(got(cg.dir[MGR_CG_CPU], "cpu.cfs_quota_us"), "-1") == 0);
	CHECK(strcmp(got(cg.dir[MGR_CG_CPU], "cpu.shares"), "1024") == 0);
	CHECK(strcmp(got(cg.dir[MGR_CG_MEMORY], "memory.limit_in_bytes"), "-1") == 0);

	put("fs/cpu,cpuacct/a/squall-m/svc/cpu.stat",
	    "nr_periods 9\nnr_throttled 5\nthrottled_time 7000\n");
	put("fs/memory/b/squall-m/svc/memory.failcnt", "3\n");
	put("fs/memory/b/squall-m/svc/memory.oom_control",
	    "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
	mgr_cgroup_stats(&cg, &st);
	CHECK(st.cpu_throttled == 5 && st.cpu_throttled_us == 7);
	CHECK(st.memory_max_hits == 3 && st.oom_kills == 2);
	CHECK(st.pids == -1); /* (no pids.current in the copy: not read) */
	mgr_cgroup_close(&cg);

	/* a limit whose controller has no hierarchy here: refused, named */
	put("self", "4:memory:/b\n2:cpu,cpuacct:/a\n");
	CHECK(mgr_cgroup_open(&cg, &r, "m", "svc2", err, sizeof(err)) == 0);
	CHECK(cg.dir[MGR_CG_PIDS][0] == '\0' && cg.procs_fd[MGR_CG_PIDS] < 0);
	CHECK(mgr_cgroup_limit(&cg, &(struct sq_cfg_cgroup){.cpu_max_pct = 10}, err, sizeof(err)) ==
	      0);
	CHECK(mgr_cgroup_limit(&cg, &(struct sq_cfg_cgroup){.pids_max = 4}, err, sizeof(err)) ==
	      -ENOTSUP);
	CHECK(strstr(err, "no pids controller") != NULL);
	mgr_cgroup_close(&cg);
}

int
main(void)
{
	test_v2("fs");
	test_v2("fs/unified");
	test_v1();
	nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	printf("cgroup: %d passed, %d failed\n", passed, failed);
	return failed != 0;
}
