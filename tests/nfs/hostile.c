/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-hostile, for tests only: an NF that, at its first burst, tries
 * what a sandboxed NF must not be able to do, then forwards packets as
 * squall-nf-fwd does. It says on stderr what became of the try:
 * "squall-nf-hostile: TRY: succeeded" or "...: TRY: failed: ERROR"; a try
 * the sandbox's filter forbids ends the process (SIGSYS) instead.
 *
 *   squall-nf-hostile --try socket|fork|ptrace|kill|setuid|mount|alloc|pool
 *
 * ptrace and kill aim at another NF: the first squall-nf-fwd process found
 * in /proc. alloc takes private memory 16 MiB at a time, touched, up to
 * 16 GiB. pool follows a packet's pool pointer to the manager's mempool and
 * scribbles over its free ring, saying first whether it is in the region.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rte_mempool.h>
#include <rte_ring.h>

#include <squall/region.h>
#include <squall/squall.h>

#include "../../nfs/nf_opt.h"

#define NF_NAME    "squall-nf-hostile"
#define ALLOC_STEP (16u << 20)
#define ALLOC_MAX  1024u /* steps */

static const char *what;
static bool tried;

static void
say(int ok)
{
	if (ok)
		fprintf(stderr, NF_NAME ": %s: succeeded\n", what);
	else
		fprintf(stderr, NF_NAME ": %s: failed: %s\n", what, strerror(errno));
}

/* Another NF: the first squall-nf-fwd in /proc, or -1. */
static pid_t
victim(void)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	pid_t pid = -1;

	while (d != NULL && pid < 0 && (e = readdir(d)) != NULL) {
		char path[300], comm[64] = "";
		FILE *f;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/comm", e->d_name);
		f = fopen(path, "r");
		if (f == NULL)
			continue;
		if (fgets(comm, sizeof(comm), f) != NULL && strcmp(comm, "squall-nf-fwd\n") == 0)
			pid = atoi(e->d_name);
		fclose(f);
	}
	if (d != NULL)
		closedir(d);
	return pid;
}

static void
alloc_unbounded(void)
{
	unsigned int n;

	for (n = 0; n < ALLOC_MAX; n++) {
		char *p = malloc(ALLOC_STEP);

		if (p == NULL)
			break;
		memset(p, 1, ALLOC_STEP); /* (kept: the point is to hold it) */
	}
	fprintf(stderr, NF_NAME ": alloc: %s at %u MiB\n", n == ALLOC_MAX ? "succeeded" : "stopped",
		n * (ALLOC_STEP >> 20));
}

/* The manager's free ring: were it in the region, the manager's next
 * allocations would hand out mbufs twice or read past the ring. */
static void
scribble_pool(struct sq_nf *nf, struct rte_mbuf *m)
{
	const struct sq_region_hdr *hdr = sq_nf_region(nf);
	struct rte_mempool *mp = m->pool;
	struct rte_ring *r;

	fprintf(stderr, NF_NAME ": pool: %s the region\n",
		(uintptr_t)mp - hdr->base_addr < hdr->len_bytes ? "in" : "outside");
	fflush(stderr);
	r = mp->pool_data; /* (outside the region: not mapped here, SIGSEGV) */
	r->cons.head += 1000;
	r->cons.tail += 1000;
	r->prod.head -= 7;
}

static void
try_once(struct sq_nf *nf, struct rte_mbuf *m)
{
	pid_t pid;

	if (strcmp(what, "socket") == 0) {
		say(socket(AF_INET, SOCK_DGRAM, 0) >= 0);
	} else if (strcmp(what, "fork") == 0) {
		pid = fork();
		if (pid == 0)
			_exit(0);
		say(pid > 0);
		if (pid > 0)
			waitpid(pid, NULL, 0);
	} else if (strcmp(what, "ptrace") == 0) {
		pid = victim();
		say(pid > 0 && ptrace(PTRACE_ATTACH, pid, NULL, NULL) == 0);
		if (pid > 0)
			ptrace(PTRACE_DETACH, pid, NULL, NULL);
	} else if (strcmp(what, "kill") == 0) {
		pid = victim();
		say(pid > 0 && kill(pid, SIGKILL) == 0);
	} else if (strcmp(what, "setuid") == 0) {
		say(setuid(0) == 0);
	} else if (strcmp(what, "mount") == 0) {
		say(mount("none", "/mnt", "tmpfs", 0, NULL) == 0);
	} else if (strcmp(what, "alloc") == 0) {
		alloc_unbounded();
	} else if (strcmp(what, "pool") == 0) {
		scribble_pool(nf, m);
	}
}

static void
burst(struct rte_mbuf **pkts, uint16_t n, void *arg)
{
	if (!tried && n > 0) {
		tried = true;
		try_once(arg, pkts[0]);
	}
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"try", required_argument, NULL, 't'},
		NF_OPT_COMMON_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	struct sq_nf *nf;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, NF_OPT_SHORT, longopts, NULL)) != -1) {
		switch (opt) {
		case 't': what = optarg; break;
		case 'h': printf("Usage: " NF_NAME " --try WHAT (tests only)\n"); return 0;
		case 0: break;
		default: return nf_opt_usage_error(NF_NAME);
		}
	}
	if (what == NULL) {
		fprintf(stderr,
			NF_NAME ": --try socket|fork|ptrace|kill|setuid|mount|alloc|pool\n");
		return NF_EXIT_USAGE;
	}
	ret = nf_opt_attach(argc, argv, &nf);
	if (ret != 0)
		return ret;
	sq_nf_set_burst_handler(nf, burst, nf);
	return sq_nf_run(nf) < 0 ? NF_EXIT_FAIL : NF_EXIT_OK;
}
