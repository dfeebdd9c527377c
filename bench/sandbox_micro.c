/* SPDX-License-Identifier: BSD-3-Clause
 * sandbox_micro: what the strict sandbox's seccomp filter (mgr/sandbox.c)
 * adds to each system call an NF makes: a cheap call (getppid) and the one
 * a sleeping NF makes most (FUTEX_WAKE with no waiter), timed in a child
 * process before and after it loads the manager's filter, as a strict NF
 * does before execve.
 *
 *   sandbox_micro [CALLS] [CORE]
 *
 * Prints "sandbox_micro NS_GETPPID_OFF NS_GETPPID_ON NS_FUTEX_OFF NS_FUTEX_ON"
 * (ns per call; medians of 5 rounds).
 */
#include <linux/futex.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sandbox.h"

#define ROUNDS 5

static uint32_t futex_word;

static double
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int
cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Median over ROUNDS of ns per call of @p futex ? FUTEX_WAKE : getppid. */
static double
time_calls(long calls, int futex)
{
	double r[ROUNDS];

	for (int k = 0; k < ROUNDS; k++) {
		double t0 = now_ns();

		for (long i = 0; i < calls; i++) {
			if (futex)
				syscall(SYS_futex, &futex_word, FUTEX_WAKE, 1, NULL, NULL, 0);
			else
				syscall(SYS_getppid);
		}
		r[k] = (now_ns() - t0) / (double)calls;
	}
	qsort(r, ROUNDS, sizeof(r[0]), cmp);
	return r[ROUNDS / 2];
}

int
main(int argc, char **argv)
{
	long calls = argc > 1 ? atol(argv[1]) : 1000000;
	int core = argc > 2 ? atoi(argv[2]) : 0, status;
	double res[4];
	int pipefd[2];
	cpu_set_t set;
	pid_t pid;

	if (calls <= 0 || mgr_sandbox_init() != 0 || pipe(pipefd) != 0) {
		fprintf(stderr, "sandbox_micro: cannot build the filter\n");
		return 1;
	}
	CPU_ZERO(&set);
	CPU_SET(core, &set);
	sched_setaffinity(0, sizeof(set), &set);
	/* In a child: a filter, once loaded, stays for the process's life. */
	pid = fork();
	if (pid == 0) {
		res[0] = time_calls(calls, 0);
		res[2] = time_calls(calls, 1);
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
		    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER,
			  mgr_sandbox_filter(MGR_SANDBOX_STRICT, false), 0, 0) != 0)
			_exit(2);
		res[1] = time_calls(calls, 0);
		res[3] = time_calls(calls, 1);
		_exit(write(pipefd[1], res, sizeof(res)) == sizeof(res) ? 0 : 3);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0 || read(pipefd[0], res, sizeof(res)) != sizeof(res)) {
		fprintf(stderr, "sandbox_micro: the timing child failed\n");
		return 1;
	}
	printf("sandbox_micro %.1f %.1f %.1f %.1f\n", res[0], res[1], res[2], res[3]);
	mgr_sandbox_free();
	return 0;
}
