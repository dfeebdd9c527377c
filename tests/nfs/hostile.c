/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-hostile, for tests only: an NF that, at its first burst, tries
 * what a sandboxed NF must not be able to do, then forwards packets as
 * squall-nf-fwd does. It says on stderr what became of the try:
 * "squall-nf-hostile: TRY: succeeded" or "...: TRY: failed: ERROR"; a try
 * the sandbox's filter forbids ends the process (SIGSYS) instead.
 *
 *   squall-nf-hostile --try socket|fork|ptrace|kill|setuid|mount|alloc|pool|
 *                           region|peek|poke|snoop|ctl|ring|spin|threads|rekey
 *                     [--marker HEX]
 *                     [--after-ms MS]
 *
 * ptrace and kill aim at another NF: the first squall-nf-fwd process found
 * in /proc. alloc takes private memory 16 MiB at a time, touched, up to
 * 16 GiB; threads starts up to 64 threads that sleep. pool follows a packet's pool pointer to the manager's mempool and
 * scribbles over its free ring, saying first whether it is in the region.
 *
 * Against isolation (`sandbox: isolated`), each aimed at what is not its
 * own: region opens every Squall region file it can find (/dev/shm's
 * symlinks, hugetlbfs files, /proc/<pid>/fd links); peek reads the shared
 * region's first word at its fixed address (SIGSEGV where it is not
 * mapped); poke writes there (an atomic add of 0: a write access that
 * changes no value, so the shared-mode control run stays clean); snoop
 * scans all the region memory it maps, for ~0.5 s, for --marker's bytes
 * (another chain's packets); ctl writes the control block of every other NF
 * slot it can reach; ring writes the rx and tx rings of every other NF slot
 * it can reach (their producer heads, again by adding 0); spin never
 * returns from its handler.
 * --after-ms: try at the first burst MS after the start, not the first
 * (a harness that waits for every NF to run sees this one run first).
 *
 * rekey, unlike the others, goes on for every packet from the NF's second:
 * it rewrites an IPv4 UDP/TCP packet's source to the generator's
 * neighbouring flow (the last address byte and the port with their lowest
 * bit flipped: flow 2k <-> 2k+1) and returns it sq_rekeyed(), claiming that
 * flow's tuple as its own flow's second key (the manager must refuse a tuple
 * that is already a flow's key).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <glob.h>
#include <pthread.h>
#include <sys/mman.h>
#include <time.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include <squall/region.h>
#include <squall/squall.h>

#include "../../nfs/nf_opt.h"

#define NF_NAME     "squall-nf-hostile"
#define ALLOC_STEP  (16u << 20)
#define ALLOC_MAX   1024u /* steps */
#define THREADS_MAX 64u

static const char *what;
static bool tried;
static uint8_t marker[64];
static size_t marker_len;
static uint64_t after_ms;
static uint64_t start_ms;

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

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

static void *
park(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

/* Threads without bound: each is a task of its service's pids.max. */
static void
threads_unbounded(void)
{
	unsigned int n;
	int e = 0;

	for (n = 0; n < THREADS_MAX; n++) {
		pthread_t t;

		e = pthread_create(&t, NULL, park, NULL);
		if (e != 0)
			break;
	}
	fprintf(stderr, NF_NAME ": threads: %s at %u%s%s\n",
		n == THREADS_MAX ? "succeeded" : "stopped", n, e ? ": " : "", e ? strerror(e) : "");
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

/* Open (read-write) and map every file that could be a Squall region. */
static void
open_regions(void)
{
	static const char *const patterns[] = {"/dev/shm/squall-*.region", "/dev/hugepages/*",
					       "/proc/[0-9]*/fd/*"};
	unsigned int tried_n = 0;
	glob_t g;

	for (size_t k = 0; k < RTE_DIM(patterns); k++) {
		if (glob(patterns[k], 0, NULL, &g) != 0)
			continue;
		for (size_t i = 0; i < g.gl_pathc; i++) {
			struct sq_region_hdr hdr;
			int fd = open(g.gl_pathv[i], O_RDWR | O_CLOEXEC | O_NONBLOCK);

			tried_n++;
			if (fd < 0)
				continue;
			if (pread(fd, &hdr, sizeof(hdr), 0) == (ssize_t)sizeof(hdr) &&
			    hdr.magic == SQ_REGION_MAGIC && hdr.max_nfs > 1 &&
			    mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) !=
				    MAP_FAILED) {
				fprintf(stderr, NF_NAME ": region: succeeded: %s\n", g.gl_pathv[i]);
				close(fd);
				globfree(&g);
				return;
			}
			close(fd);
		}
		globfree(&g);
	}
	fprintf(stderr, NF_NAME ": region: failed: none of %u files is a region it can map\n",
		tried_n);
}

/* The shared region's first word, at the address every shared NF maps it. */
static void
peek(void)
{
	const volatile uint64_t *p = (const volatile uint64_t *)(uintptr_t)SQ_REGION_BASE_ADDR;

	fprintf(stderr, NF_NAME ": peek: reading %#llx\n", SQ_REGION_BASE_ADDR);
	fflush(stderr);
	fprintf(stderr, NF_NAME ": peek: succeeded: %#" PRIx64 "\n", *p);
}

/* A write to the shared region's header, at the address every shared NF
 * maps it: its length field, added 0 to. */
static void
poke(void)
{
	struct sq_region_hdr *hdr = (struct sq_region_hdr *)(uintptr_t)SQ_REGION_BASE_ADDR;

	fprintf(stderr, NF_NAME ": poke: writing %#llx\n", SQ_REGION_BASE_ADDR);
	fflush(stderr);
	__atomic_fetch_add(&hdr->len_bytes, 0, __ATOMIC_RELAXED);
	fprintf(stderr, NF_NAME ": poke: succeeded\n");
}

/* Another chain's packets, anywhere in the region memory this NF maps. */
static void
snoop(struct sq_nf *nf)
{
	const struct sq_region_hdr *hdr = sq_nf_region(nf);
	const struct timespec nap = {.tv_nsec = 10 * 1000 * 1000};

	for (int i = 0; i < 40; i++) {
		const uint8_t *at = memmem(hdr, hdr->len_bytes, marker, marker_len);

		if (at != NULL) {
			fprintf(stderr, NF_NAME ": snoop: succeeded: at offset %zu\n",
				(size_t)(at - (const uint8_t *)hdr));
			return;
		}
		nanosleep(&nap, NULL);
	}
	fprintf(stderr, NF_NAME ": snoop: failed: not in the %" PRIu64 " KiB it maps\n",
		hdr->len_bytes >> 10);
}

/* Every other NF slot's control block and rings in reach: scribbled. */
static void
other_ctls(struct sq_nf *nf)
{
	struct sq_region_hdr *hdr = sq_nf_region(nf);
	uint32_t own = sq_nf_ctl(nf)->id, n = 0;

	for (uint32_t id = 0; id < hdr->max_nfs; id++) {
		struct sq_nf_ctl *ctl = sq_region_nf_ctl(hdr, id);

		if (id == own || ctl->rx_ring_off == 0)
			continue;
		ctl->counters[SQ_NF_COUNTERS - 1] += 1;
		n++;
	}
	if (n > 0)
		fprintf(stderr, NF_NAME ": ctl: succeeded: %u other NFs\n", n);
	else
		fprintf(stderr, NF_NAME ": ctl: failed: no other NF in reach (%u slots)\n",
			hdr->max_nfs);
}

/* Every other NF slot's rings in reach: a write to each (the producer head,
 * added 0 to). */
static void
other_rings(struct sq_nf *nf)
{
	struct sq_region_hdr *hdr = sq_nf_region(nf);
	uint32_t own = sq_nf_ctl(nf)->id, n = 0;

	for (uint32_t id = 0; id < hdr->max_nfs; id++) {
		struct sq_nf_ctl *ctl = sq_region_nf_ctl(hdr, id);

		if (id == own || ctl->rx_ring_off == 0 || ctl->tx_ring_off == 0)
			continue;
		__atomic_fetch_add(
			&((struct rte_ring *)((char *)hdr + ctl->rx_ring_off))->prod.head, 0,
			__ATOMIC_RELAXED);
		__atomic_fetch_add(
			&((struct rte_ring *)((char *)hdr + ctl->tx_ring_off))->prod.head, 0,
			__ATOMIC_RELAXED);
		n++;
	}
	if (n > 0)
		fprintf(stderr, NF_NAME ": ring: succeeded: %u other NFs' rings\n", n);
	else
		fprintf(stderr, NF_NAME ": ring: failed: no other NF's ring in reach (%u slots)\n",
			hdr->max_nfs);
}

static int
parse_marker(const char *hex)
{
	size_t n = strlen(hex) / 2;

	if (n == 0 || n > sizeof(marker) || strlen(hex) % 2 != 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		unsigned int b;

		if (sscanf(hex + 2 * i, "%2x", &b) != 1)
			return -1;
		marker[i] = (uint8_t)b;
	}
	marker_len = n;
	return 0;
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
		/* (none in sight, in a pid namespace of its own: pid 1, itself) */
		pid = victim();
		say(ptrace(PTRACE_ATTACH, pid > 0 ? pid : 1, NULL, NULL) == 0);
		if (pid > 0)
			ptrace(PTRACE_DETACH, pid, NULL, NULL);
	} else if (strcmp(what, "kill") == 0) {
		pid = victim();
		if (pid < 0)
			errno = ESRCH; /* (no other NF in sight: its own pid namespace) */
		say(pid > 0 && kill(pid, SIGKILL) == 0);
	} else if (strcmp(what, "setuid") == 0) {
		say(setuid(0) == 0);
	} else if (strcmp(what, "mount") == 0) {
		say(mount("none", "/mnt", "tmpfs", 0, NULL) == 0);
	} else if (strcmp(what, "alloc") == 0) {
		alloc_unbounded();
	} else if (strcmp(what, "threads") == 0) {
		threads_unbounded();
	} else if (strcmp(what, "pool") == 0) {
		scribble_pool(nf, m);
	} else if (strcmp(what, "region") == 0) {
		open_regions();
	} else if (strcmp(what, "peek") == 0) {
		peek();
	} else if (strcmp(what, "poke") == 0) {
		poke();
	} else if (strcmp(what, "ring") == 0) {
		other_rings(nf);
	} else if (strcmp(what, "snoop") == 0) {
		snoop(nf);
	} else if (strcmp(what, "ctl") == 0) {
		other_ctls(nf);
	} else if (strcmp(what, "spin") == 0) {
		fprintf(stderr, NF_NAME ": spin: spinning\n");
		for (volatile uint64_t i = 0;; i++)
			;
	}
}

/* rekey: the packet's source moved to the neighbouring generator flow's. */
static void
claim_neighbour(struct rte_mbuf *m)
{
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	rte_be16_t *sport = (rte_be16_t *)((uint8_t *)ip + rte_ipv4_hdr_len(ip));

	if (eth->ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) ||
	    (ip->next_proto_id != IPPROTO_UDP && ip->next_proto_id != IPPROTO_TCP))
		return;
	ip->src_addr ^= rte_cpu_to_be_32(1);
	*sport ^= rte_cpu_to_be_16(1);
	ip->hdr_checksum = 0;
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	sq_pkt_set_verdict(m, sq_rekeyed(SQ_NEXT));
}

static void
burst(struct rte_mbuf **pkts, uint16_t n, void *arg)
{
	static uint64_t seen;

	if (what != NULL && strcmp(what, "rekey") == 0) {
		for (uint16_t i = 0; i < n; i++)
			if (seen++ > 0)
				claim_neighbour(pkts[i]);
		return;
	}
	if (!tried && n > 0 && now_ms() - start_ms >= after_ms) {
		tried = true;
		try_once(arg, pkts[0]);
	}
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"try", required_argument, NULL, 't'},
		{"marker", required_argument, NULL, 'm'},
		{"after-ms", required_argument, NULL, 'a'},
		NF_OPT_COMMON_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	struct sq_nf *nf;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, NF_OPT_SHORT, longopts, NULL)) != -1) {
		switch (opt) {
		case 't': what = optarg; break;
		case 'a': after_ms = strtoull(optarg, NULL, 10); break;
		case 'm':
			if (parse_marker(optarg) < 0)
				return nf_opt_usage_error(NF_NAME);
			break;
		case 'h': printf("Usage: " NF_NAME " --try WHAT (tests only)\n"); return 0;
		case 0: break;
		default: return nf_opt_usage_error(NF_NAME);
		}
	}
	if (what == NULL) {
		fprintf(stderr, NF_NAME ": --try socket|fork|ptrace|kill|setuid|mount|alloc|pool|"
					"region|peek|poke|snoop|ctl|ring|spin|threads|rekey "
					"[--marker HEX]\n");
		return NF_EXIT_USAGE;
	}
	ret = nf_opt_attach(argc, argv, &nf);
	if (ret != 0)
		return ret;
	start_ms = now_ms();
	sq_nf_set_burst_handler(nf, burst, nf);
	return sq_nf_run(nf) < 0 ? NF_EXIT_FAIL : NF_EXIT_OK;
}
