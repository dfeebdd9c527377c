/* SPDX-License-Identifier: BSD-3-Clause
 * cgroup: a service's NFs under cpu, memory and pids limits together.
 *
 * The group is MGR/SERVICE under the manager's own cgroup of each
 * controller, not under the hierarchy's root: a manager run by systemd with
 * Delegate=yes (or in a container) owns its subtree and nothing above it.
 * cgroup v2 is used when its cgroup.controllers lists cpu, memory and pids;
 * a host that still binds them to v1 hierarchies (this project's CI machine
 * does) gets the same limits through v1's files. The NF joins its group in
 * its own process before execve (mgr/spawn.c writes "0" to the fds opened
 * here), so it never runs a moment outside it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"

#define CPU_PERIOD_US 100000u

static const char *const ctrl_names[MGR_CG_N] = {"cpu", "memory", "pids"};

static int
fail(char *err, size_t len, int e, const char *fmt, const char *a, const char *b)
{
	char what[PATH_MAX + 256];

	/* (a path too long for err is cut, still naming the failed step) */
	if (snprintf(what, sizeof(what), fmt, a, b) >= (int)sizeof(what))
		what[sizeof(what) - 1] = '\0';
	if (snprintf(err, len, "%s: %s", what, strerror(e)) >= (int)len)
		err[len - 1] = '\0';
	return -e;
}

/* out = a b c, or -ENAMETOOLONG */
static int
join(char *out, size_t len, const char *a, const char *b, const char *c)
{
	return snprintf(out, len, "%s%s%s", a, b, c) >= (int)len ? -ENAMETOOLONG : 0;
}

static int
write_file(const char *dir, const char *file, const char *value)
{
	char path[PATH_MAX];
	ssize_t n;
	int fd, e;

	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	/* (O_CREAT: a no-op on cgroupfs, whose files the kernel makes) */
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	n = write(fd, value, strlen(value));
	e = n < 0 ? errno : 0;
	close(fd);
	return n < 0 ? -e : 0;
}

static int
read_file(const char *dir, const char *file, char *buf, size_t len)
{
	char path[PATH_MAX];
	ssize_t n;
	int fd;

	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -EIO;
	buf[n] = '\0';
	return 0;
}

static bool
has_word(const char *list, const char *word, const char *seps)
{
	size_t wl = strlen(word);

	for (const char *p = list; *p != '\0';) {
		size_t n = strcspn(p, seps);

		if (n == wl && strncmp(p, word, wl) == 0)
			return true;
		p += n;
		p += strspn(p, seps);
	}
	return false;
}

/* The v2 mount whose controllers include all three: fs itself, or the
 * hybrid layout's fs/unified. */
static bool
find_v2(const char *fs, char *mount, size_t len)
{
	static const char *const where[] = {"", "/unified"};
	char buf[512];

	for (size_t i = 0; i < 2; i++) {
		if (join(mount, len, fs, where[i], "") < 0)
			return false;
		if (read_file(mount, "cgroup.controllers", buf, sizeof(buf)) == 0 &&
		    has_word(buf, "cpu", " \n") && has_word(buf, "memory", " \n") &&
		    has_word(buf, "pids", " \n"))
			return true;
	}
	return false;
}

/* This process's path in the hierarchy whose controller list (the second
 * field of /proc/self/cgroup; empty for v2) holds ctrl, or v2's for NULL;
 * *list gets that controller list (v1's mount is fs/LIST). */
static int
self_path(const char *self, const char *ctrl, char *path, size_t len, char *list, size_t list_len)
{
	char line[PATH_MAX + 128];
	int ret = -ENOENT;
	FILE *f;

	f = fopen(self, "re");
	if (f == NULL)
		return -errno;
	while (ret != 0 && fgets(line, sizeof(line), f) != NULL) {
		char *c1 = strchr(line, ':'), *c2 = c1 != NULL ? strchr(c1 + 1, ':') : NULL;

		if (c2 == NULL)
			continue;
		*c2 = '\0';
		line[strcspn(line, "\n")] = '\0';
		c2[1 + strcspn(c2 + 1, "\n")] = '\0';
		if (ctrl == NULL ? c1[1] == '\0' : has_word(c1 + 1, ctrl, ",")) {
			snprintf(path, len, "%s", strcmp(c2 + 1, "/") == 0 ? "" : c2 + 1);
			snprintf(list, list_len, "%s", c1 + 1);
			ret = 0;
		}
	}
	fclose(f);
	return ret;
}

static int
make_dir(const char *dir)
{
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* v2: each level above a group must pass the controllers down; a cgroup
 * with processes of its own cannot (the "no internal processes" rule). */
static int
open_v2(struct mgr_cgroup *cg, const char *mount, const char *self, const char *mgr,
	const char *service, char *err, size_t len)
{
	char base[PATH_MAX], rel[PATH_MAX], list[64];
	int ret;

	ret = self_path(self, NULL, rel, sizeof(rel), list, sizeof(list));
	if (ret < 0)
		return fail(err, len, -ret, "%s: no cgroup v2 line%s", self, "");
	if (join(base, sizeof(base), mount, rel, "") < 0 ||
	    join(cg->parent[0], sizeof(cg->parent[0]), base, "/squall-", mgr) < 0 ||
	    join(cg->dir[0], sizeof(cg->dir[0]), cg->parent[0], "/", service) < 0)
		return fail(err, len, ENAMETOOLONG, "cgroup v2: %s%s", base, "");
	ret = write_file(base, "cgroup.subtree_control", "+cpu +memory +pids");
	if (ret < 0)
		return fail(err, len, -ret,
			    "cgroup v2: cannot enable cpu, memory and pids below %s%s", base,
			    " (a cgroup with processes of its own cannot; run squall-mgr in a "
			    "delegated cgroup, e.g. systemd-run -p Delegate=yes)");
	ret = make_dir(cg->parent[0]);
	if (ret == 0)
		ret = write_file(cg->parent[0], "cgroup.subtree_control", "+cpu +memory +pids");
	if (ret < 0)
		return fail(err, len, -ret, "cgroup v2: %s%s", cg->parent[0], "");
	ret = make_dir(cg->dir[0]);
	if (ret < 0)
		return fail(err, len, -ret, "cgroup v2: %s%s", cg->dir[0], "");
	for (int i = 1; i < MGR_CG_N; i++) {
		memcpy(cg->dir[i], cg->dir[0], sizeof(cg->dir[i]));
		cg->parent[i][0] = '\0';
	}
	cg->version = 2;
	return 0;
}

/* v1: a hierarchy per controller, each at fs/LIST ("cpu,cpuacct" or
 * "cpu"); a controller that has none here is left out (its limit, if
 * asked for, fails in mgr_cgroup_limit). */
static int
open_v1(struct mgr_cgroup *cg, const struct mgr_cg_root *root, const char *mgr, const char *service,
	char *err, size_t len)
{
	char rel[PATH_MAX], list[64], base[PATH_MAX];
	int ret;

	for (int i = 0; i < MGR_CG_N; i++) {
		cg->dir[i][0] = cg->parent[i][0] = '\0';
		if (self_path(root->self, ctrl_names[i], rel, sizeof(rel), list, sizeof(list)) < 0)
			continue;
		char hier[PATH_MAX];

		/* (systemd's layout links cpu to cpu,cpuacct; others mount either) */
		if (join(hier, sizeof(hier), root->fs, "/", list) < 0 || access(hier, F_OK) < 0)
			join(hier, sizeof(hier), root->fs, "/", ctrl_names[i]);
		if (join(base, sizeof(base), hier, rel, "") < 0 || access(base, F_OK) < 0)
			continue;
		if (join(cg->parent[i], sizeof(cg->parent[i]), base, "/squall-", mgr) < 0 ||
		    join(cg->dir[i], sizeof(cg->dir[i]), cg->parent[i], "/", service) < 0)
			return fail(err, len, ENAMETOOLONG, "cgroup v1: %s%s", base, "");
		ret = make_dir(cg->parent[i]);
		if (ret == 0)
			ret = make_dir(cg->dir[i]);
		if (ret < 0)
			return fail(err, len, -ret, "cgroup v1: %s%s", cg->dir[i], "");
	}
	cg->version = 1;
	return 0;
}

int
mgr_cgroup_open(struct mgr_cgroup *cg, const struct mgr_cg_root *root, const char *mgr,
		const char *service, char *err, size_t err_len)
{
	char mount[PATH_MAX], path[PATH_MAX + 16];
	int ret;

	memset(cg, 0, sizeof(*cg));
	snprintf(cg->name, sizeof(cg->name), "%s", service);
	for (int i = 0; i < MGR_CG_N; i++)
		cg->procs_fd[i] = -1;
	if (find_v2(root->fs, mount, sizeof(mount)))
		ret = open_v2(cg, mount, root->self, mgr, service, err, err_len);
	else
		ret = open_v1(cg, root, mgr, service, err, err_len);
	for (int i = 0; ret == 0 && i < (cg->version == 2 ? 1 : MGR_CG_N); i++) {
		if (cg->dir[i][0] == '\0')
			continue;
		join(path, sizeof(path), cg->dir[i], "/cgroup.procs", "");
		cg->procs_fd[i] = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (cg->procs_fd[i] < 0)
			ret = fail(err, err_len, errno, "%s%s", path, "");
	}
	if (ret < 0)
		mgr_cgroup_close(cg);
	return ret;
}

/* One limit: v2's file and value, or v1's. */
struct knob {
	enum mgr_cg_ctrl ctrl;
	bool wanted;
	const char *file;
	char value[32];
};

static int
write_knobs(struct mgr_cgroup *cg, const struct knob *k, size_t n, char *err, size_t len)
{
	for (size_t i = 0; i < n; i++) {
		const char *dir = cg->dir[k[i].ctrl];
		int ret;

		if (dir[0] == '\0') {
			if (!k[i].wanted)
				continue;
			snprintf(
				err, len,
				"no %s controller here (neither cgroup v2 nor v1 offers it) for %s",
				ctrl_names[k[i].ctrl], k[i].file);
			return -ENOTSUP;
		}
		ret = write_file(dir, k[i].file, k[i].value);
		if (ret < 0)
			return fail(err, len, -ret, "%s/%s", dir, k[i].file);
	}
	return 0;
}

int
mgr_cgroup_limit(struct mgr_cgroup *cg, const struct sq_cfg_cgroup *lim, char *err, size_t err_len)
{
	struct knob k[5] = {
		{MGR_CG_CPU, lim->cpu_max_pct != 0, NULL, ""},
		{MGR_CG_CPU, lim->cpu_weight != 0, NULL, ""},
		{MGR_CG_MEMORY, lim->memory_max_mb != 0, NULL, ""},
		{MGR_CG_PIDS, lim->pids_max != 0, "pids.max", "max"},
		{MGR_CG_CPU, lim->cpu_max_pct != 0, NULL, ""},
	};
	size_t n = 4;
	int ret;

	if (lim->pids_max != 0)
		snprintf(k[3].value, sizeof(k[3].value), "%u", lim->pids_max);
	if (cg->version == 2) {
		k[0].file = "cpu.max";
		if (lim->cpu_max_pct != 0)
			snprintf(k[0].value, sizeof(k[0].value), "%u %u", lim->cpu_max_pct * 1000,
				 CPU_PERIOD_US);
		else
			snprintf(k[0].value, sizeof(k[0].value), "max %u", CPU_PERIOD_US);
		k[1].file = "cpu.weight";
		snprintf(k[1].value, sizeof(k[1].value), "%u",
			 lim->cpu_weight != 0 ? lim->cpu_weight : 100);
		k[2].file = "memory.max";
	} else {
		/* v1: the period first, then the quota of it */
		k[0].file = "cpu.cfs_period_us";
		snprintf(k[0].value, sizeof(k[0].value), "%u", CPU_PERIOD_US);
		k[4].file = "cpu.cfs_quota_us";
		if (lim->cpu_max_pct != 0)
			snprintf(k[4].value, sizeof(k[4].value), "%u", lim->cpu_max_pct * 1000);
		else
			snprintf(k[4].value, sizeof(k[4].value), "-1");
		n = 5;
		/* systemd's mapping of a weight to shares: 100 is 1024 (1 is 10) */
		k[1].file = "cpu.shares";
		snprintf(k[1].value, sizeof(k[1].value), "%u",
			 lim->cpu_weight != 0 ? lim->cpu_weight * 1024 / 100 : 1024);
		k[2].file = "memory.limit_in_bytes";
	}
	if (lim->memory_max_mb != 0)
		snprintf(k[2].value, sizeof(k[2].value), "%llu",
			 (unsigned long long)lim->memory_max_mb << 20);
	else
		snprintf(k[2].value, sizeof(k[2].value), cg->version == 2 ? "max" : "-1");
	ret = write_knobs(cg, k, n, err, err_len);
	if (ret == 0)
		cg->set = *lim;
	return ret;
}

int
mgr_cgroup_attach(const struct mgr_cgroup *cg, pid_t pid)
{
	char buf[24];
	int n = snprintf(buf, sizeof(buf), "%d", (int)pid);

	for (int i = 0; i < MGR_CG_N; i++)
		if (cg->procs_fd[i] >= 0 && write(cg->procs_fd[i], buf, (size_t)n) < 0)
			return -errno;
	return 0;
}

int
mgr_cgroup_close(struct mgr_cgroup *cg)
{
	int ret = 0;

	for (int i = 0; i < MGR_CG_N; i++) {
		if (cg->procs_fd[i] >= 0)
			close(cg->procs_fd[i]);
		cg->procs_fd[i] = -1;
		if (cg->dir[i][0] == '\0' || (i > 0 && cg->version == 2))
			continue;
		if (rmdir(cg->dir[i]) < 0 && errno != ENOENT)
			ret = -errno;
		/* the manager's level too, once its last service's group is gone */
		if (cg->parent[i][0] != '\0')
			rmdir(cg->parent[i]);
	}
	return ret;
}

/* "KEY N" in a flat-keyed file, or the file's one number for key NULL. */
static long long
read_value(const char *dir, const char *file, const char *key)
{
	char buf[1024];
	size_t kl = key != NULL ? strlen(key) : 0;

	if (dir[0] == '\0' || read_file(dir, file, buf, sizeof(buf)) < 0)
		return -1;
	if (key == NULL)
		return strtoll(buf, NULL, 10);
	for (char *p = buf; p != NULL && *p != '\0'; p = strchr(p, '\n'), p = p ? p + 1 : p)
		if (strncmp(p, key, kl) == 0 && p[kl] == ' ')
			return strtoll(p + kl + 1, NULL, 10);
	return -1;
}

void
mgr_cgroup_stats(const struct mgr_cgroup *cg, struct mgr_cg_stats *st)
{
	const char *cpu = cg->dir[MGR_CG_CPU], *mem = cg->dir[MGR_CG_MEMORY];
	const char *pids = cg->dir[MGR_CG_PIDS];
	bool v2 = cg->version == 2;

	st->cpu_throttled = read_value(cpu, "cpu.stat", "nr_throttled");
	st->cpu_throttled_us = v2 ? read_value(cpu, "cpu.stat", "throttled_usec")
				  : read_value(cpu, "cpu.stat", "throttled_time");
	if (!v2 && st->cpu_throttled_us > 0)
		st->cpu_throttled_us /= 1000; /* (v1 counts ns) */
	st->memory_bytes = read_value(mem, v2 ? "memory.current" : "memory.usage_in_bytes", NULL);
	st->memory_max_hits = v2 ? read_value(mem, "memory.events", "max")
				 : read_value(mem, "memory.failcnt", NULL);
	st->oom_kills = read_value(mem, v2 ? "memory.events" : "memory.oom_control", "oom_kill");
	st->pids = read_value(pids, "pids.current", NULL);
	st->pids_max_hits = read_value(pids, "pids.events", "max");
}
