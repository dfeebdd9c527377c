/* SPDX-License-Identifier: BSD-3-Clause
 * The readiness clock (mgr/ready.c): a starting NF that waits for a CPU is
 * not held to the limit for that time; one that sleeps, or is stopped, is;
 * and the description says which it is.
 *
 * The starved NF is a child pinned to CPU 0 beside a SCHED_FIFO spinner on
 * the same CPU (root only, and two CPUs: the test itself runs on CPU 1).
 */
#include <inttypes.h>
#include <sched.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "ready.h"

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

static void
pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) < 0) {
		perror("sched_setaffinity");
		_exit(3);
	}
}

/* A child that spins on CPU 0 until killed (SCHED_FIFO at 1 if @p fifo,
 * for at most @p max_ms then). */
static pid_t
spinner(bool fifo, uint32_t max_ms)
{
	pid_t pid = fork();

	if (pid != 0)
		return pid;
	pin(0);
	if (fifo) {
		struct sched_param sp = {.sched_priority = 1};
		uint64_t end = now_ns() + (uint64_t)max_ms * 1000000;

		if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0)
			_exit(3);
		while (now_ns() < end)
			;
		_exit(0);
	}
	for (;;)
		;
}

static pid_t
sleeper(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		pause();
		_exit(0);
	}
	return pid;
}

static void
reap(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* Sample @p nf every 10 ms for @p ms against a limit of @p limit_ms, until
 * it is overdue. */
static bool
watch(struct ready_clock *c, pid_t nf, uint32_t ms, uint32_t limit_ms)
{
	bool overdue = false;

	for (uint32_t t = 0; t < ms && !overdue; t += 10) {
		usleep(10 * 1000);
		overdue = mgr_ready_overdue(c, nf, mgr_ready_now_ns(), limit_ms);
	}
	return overdue;
}

static void
test_starved(void)
{
	struct ready_clock c;
	char what[192];
	pid_t nf, hog;

	if (geteuid() != 0 || sysconf(_SC_NPROCESSORS_ONLN) < 2) {
		printf("ready: starved case skipped (needs root and 2 CPUs)\n");
		return;
	}
	pin(1);
	nf = spinner(false, 0);
	hog = spinner(true, 700);
	mgr_ready_start(&c, mgr_ready_now_ns());
	/* 500 ms waiting for CPU 0 the hog holds: not 200 ms of its own */
	CHECK(!watch(&c, nf, 500, 200));
	CHECK(c.used_ns < 100 * 1000000ull);
	mgr_ready_describe(nf, what, sizeof(what));
	CHECK(strncmp(what, "runnable", 8) == 0);
	printf("ready: starved: %s, %" PRIu64 " ms its own\n", what, c.used_ns / 1000000);
	waitpid(hog, NULL, 0);
	/* the hog gone, the spinning NF uses its time: overdue (a bounded wait:
	 * the machine may be busy) */
	CHECK(watch(&c, nf, 1900, 200));
	reap(nf);
	/* and ten times the limit in wall time is the end in any case */
	mgr_ready_start(&c, mgr_ready_now_ns() - 2000 * 1000000ull);
	CHECK(mgr_ready_overdue(&c, nf, mgr_ready_now_ns(), 200));
}

static void
test_sleeping_and_stopped(void)
{
	struct ready_clock c;
	pid_t nf = sleeper();
	char what[192];

	mgr_ready_start(&c, mgr_ready_now_ns());
	/* asleep of its own accord: every interval counts, so it is overdue
	 * when the wall clock says, a sample's interval late at most (however
	 * late this test ran) */
	for (int k = 0; k < 12; k++) {
		uint64_t now, wall;
		bool overdue;

		usleep(15 * 1000);
		now = mgr_ready_now_ns();
		wall = now - c.start_ns;
		overdue = mgr_ready_overdue(&c, nf, now, 100);
		CHECK(overdue ? wall > 100 * 1000000ull
			      : wall <= 100 * 1000000ull + READY_SAMPLE_NS);
	}
	CHECK(mgr_ready_overdue(&c, nf, mgr_ready_now_ns(), 100));
	mgr_ready_describe(nf, what, sizeof(what));
	CHECK(strncmp(what, "sleeping", 8) == 0);
	printf("ready: sleeping: %s\n", what);
	kill(nf, SIGSTOP);
	usleep(50 * 1000);
	mgr_ready_describe(nf, what, sizeof(what));
	CHECK(strncmp(what, "stopped", 7) == 0);
	mgr_ready_start(&c, mgr_ready_now_ns());
	CHECK(watch(&c, nf, 150, 100));
	reap(nf);
	mgr_ready_describe(nf, what, sizeof(what));
	CHECK(strncmp(what, "gone", 4) == 0);
}

int
main(void)
{
	test_sleeping_and_stopped();
	test_starved();
	printf("ready: %d passed, %d failed\n", passed, failed);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
