/* SPDX-License-Identifier: BSD-3-Clause
 * How long a starting NF has had to get ready, and what it is doing if it is
 * not. On a loaded machine a new NF can wait seconds for a CPU before it
 * runs a line of its own: a wall-clock limit then kills NFs that did
 * nothing wrong (a manager start failed once in eleven that way). So the
 * limit counts only the time the NF could use: sampled now and then, an
 * interval it spent runnable counts as the CPU time it got in it, one it
 * spent asleep or stopped (its own doing) counts whole. The kernel's run
 * delay (/proc/<pid>/schedstat) would be simpler, but it grows only when a
 * waiting task gets its CPU, so a task starved from its start shows none. A
 * hard cap of READY_WALL_FACTOR times the limit in wall time stays.
 */
#ifndef SQUALL_MGR_READY_H
#define SQUALL_MGR_READY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The limit's cap in wall time: this many times the limit. */
#define READY_WALL_FACTOR 10
/* Samples at most this often (each reads /proc/<pid>/stat). */
#define READY_SAMPLE_NS   (20 * 1000 * 1000ull)

/* A starting NF's clock: wall time and the time it could use, in ns. */
struct ready_clock {
	uint64_t start_ns, last_ns; /* CLOCK_MONOTONIC */
	uint64_t used_ns;           /* time it could use, to last_ns */
	uint64_t last_cpu_ns;       /* its CPU time at last_ns */
};

uint64_t mgr_ready_now_ns(void);

/* At spawn, before the NF has run. */
void mgr_ready_start(struct ready_clock *c, uint64_t now_ns);

/* Sample NF @p pid if READY_SAMPLE_NS passed since the last sample, and say
 * whether it is past a limit of @p limit_ms of time it could use (or ten
 * times that in wall time). */
bool mgr_ready_overdue(struct ready_clock *c, pid_t pid, uint64_t now_ns, uint32_t limit_ms);

/* What NF @p pid is doing, for the error that gives up on it: its
 * scheduler state, where it sleeps, the CPU it used, e.g. "sleeping in
 * futex_wait_queue, 14 ms of CPU". Into @p buf (@p len bytes). */
void mgr_ready_describe(pid_t pid, char *buf, size_t len);

#endif /* SQUALL_MGR_READY_H */
