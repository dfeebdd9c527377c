/* SPDX-License-Identifier: BSD-3-Clause
 * A starting NF's readiness clock: see ready.h.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ready.h"

uint64_t
mgr_ready_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

/* @p path's first line into @p buf; its length, or -1. */
static ssize_t
read_line(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return n;
}

/* NF @p pid's scheduler state letter and CPU time (ns); '?' if gone. */
static char
sample(pid_t pid, uint64_t *cpu_ns)
{
	char path[64], stat[512];
	unsigned long utime = 0, stime = 0;
	long tick = sysconf(_SC_CLK_TCK);
	const char *rest;
	char state = '?';

	*cpu_ns = 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	/* pid (comm) state ppid ... utime stime: fields 14 and 15, counted
	 * after the command name, which may hold blanks and parentheses */
	if (read_line(path, stat, sizeof(stat)) <= 0 || (rest = strrchr(stat, ')')) == NULL ||
	    sscanf(rest + 1, " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &state, &utime,
		   &stime) != 3)
		return '?';
	if (tick > 0)
		*cpu_ns = (uint64_t)(utime + stime) * (1000000000ull / (uint64_t)tick);
	return state;
}

void
mgr_ready_start(struct ready_clock *c, uint64_t now_ns)
{
	c->start_ns = c->last_ns = now_ns;
	c->used_ns = 0;
	c->last_cpu_ns = 0;
}

bool
mgr_ready_overdue(struct ready_clock *c, pid_t pid, uint64_t now_ns, uint32_t limit_ms)
{
	uint64_t limit_ns = (uint64_t)limit_ms * 1000000, dt, cpu_ns;
	char state;

	if (now_ns - c->start_ns >= limit_ns * READY_WALL_FACTOR)
		return true;
	if (now_ns - c->last_ns < READY_SAMPLE_NS)
		return c->used_ns > limit_ns;
	dt = now_ns - c->last_ns;
	state = sample(pid, &cpu_ns);
	if (state == 'R')
		/* (CPU time moves in ticks: at most the interval) */
		c->used_ns +=
			cpu_ns > c->last_cpu_ns
				? (cpu_ns - c->last_cpu_ns < dt ? cpu_ns - c->last_cpu_ns : dt)
				: 0;
	else
		c->used_ns += dt;
	c->last_ns = now_ns;
	if (cpu_ns > c->last_cpu_ns)
		c->last_cpu_ns = cpu_ns;
	return c->used_ns > limit_ns;
}

static const char *
state_name(char s)
{
	switch (s) {
	case 'R': return "runnable";
	case 'S': return "sleeping";
	case 'D': return "in an uninterruptible wait";
	case 'T': return "stopped";
	case 't': return "stopped by a tracer";
	case 'Z': return "exited";
	default: return "gone";
	}
}

void
mgr_ready_describe(pid_t pid, char *buf, size_t len)
{
	char path[64], wchan[64] = "";
	uint64_t cpu_ns;
	char state = sample(pid, &cpu_ns);
	bool where;

	snprintf(path, sizeof(path), "/proc/%d/wchan", (int)pid);
	where = (state == 'S' || state == 'D') && read_line(path, wchan, sizeof(wchan)) > 0 &&
		strcmp(wchan, "0") != 0;
	snprintf(buf, len, "%s%s%s, %" PRIu64 " ms of CPU", state_name(state), where ? " in " : "",
		 where ? wchan : "", cpu_ns / 1000000);
}
