/* SPDX-License-Identifier: BSD-3-Clause
 * The control threads' priority: see ctlprio.h.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "ctlprio.h"

/* Nice of a control thread under the normal scheduler. */
#define CTL_NICE (-20)

static int
raise_tid(pid_t tid, bool realtime)
{
	struct sched_param sp = {.sched_priority = realtime ? MGR_CTL_PRIORITY : 0};

	/* (threads it creates inherit the policy: glibc's default attributes
	 * inherit the creator's scheduling) */
	if (sched_setscheduler(tid, realtime ? SCHED_FIFO : SCHED_OTHER, &sp) < 0)
		return -errno;
	if (!realtime && setpriority(PRIO_PROCESS, (id_t)tid, CTL_NICE) < 0)
		return -errno;
	return 0;
}

int
mgr_ctlprio_self(bool realtime)
{
	return raise_tid(gettid(), realtime);
}

void
mgr_ctlprio_normal_self(void)
{
	struct sched_param sp = {.sched_priority = 0};

	sched_setscheduler(gettid(), SCHED_OTHER, &sp);
	setpriority(PRIO_PROCESS, (id_t)gettid(), 0);
}

static bool
is_ctl_thread(const char *comm)
{
	static const char *const prefixes[] = MGR_CTL_THREADS;

	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (strncmp(comm, prefixes[i], strlen(prefixes[i])) == 0)
			return true;
	return false;
}

int
mgr_ctlprio_raise_all(bool realtime)
{
	DIR *d = opendir("/proc/self/task");
	const struct dirent *e;
	int raised = 0, err = 0;

	if (d == NULL)
		return -errno;
	while ((e = readdir(d)) != NULL) {
		char path[300], comm[32] = "";
		ssize_t n;
		int fd, ret;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, comm, sizeof(comm) - 1);
		close(fd);
		if (n <= 0)
			continue;
		comm[n] = '\0';
		if (!is_ctl_thread(comm))
			continue;
		ret = raise_tid((pid_t)atoi(e->d_name), realtime);
		if (ret == 0)
			raised++;
		else if (err == 0)
			err = ret;
	}
	closedir(d);
	return err != 0 ? err : raised;
}
