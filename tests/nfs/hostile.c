/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-hostile, for tests only: an NF that, at its first burst, tries
 * what a sandboxed NF must not be able to do, then forwards packets as
 * squall-nf-fwd does. It says on stderr what became of the try:
 * "squall-nf-hostile: TRY: succeeded" or "...: TRY: failed: ERROR"; a try
 * the sandbox's filter forbids ends the process (SIGSYS) instead.
 *
 *   squall-nf-hostile --try socket|fork|ptrace|kill|setuid|mount|alloc|pool|
 *                           region|peek|poke|snoop|ctl|ring|spin|threads|rekey|claimnext|allocmeta|
 *                           fds|tiocsti|accept|procmem|mgrpid|extbuf|indirect|shmalloc|hugealloc|
 *                           decoy|truncate|outport
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
 * Against the manager and the host, in every mode: fds lists the
 * descriptors it has ("fds: 0:chr 1:fifo 2:fifo", found by fstat, which
 * every filter allows); tiocsti types a character into every terminal it
 * holds or can open (/dev/tty); accept looks for a socket among its
 * descriptors (one it did not make: the manager's); procmem opens and reads
 * another NF's /proc/<pid>/mem (the first squall-nf-fwd, as kill); mgrpid
 * writes a pid that is no process into the region header's manager pid,
 * every 100 us for 4 s from a thread (an NF that believed it would think
 * the manager gone and exit); extbuf hands its packet back marked
 * RTE_MBUF_F_EXTERNAL with a shared info whose free callback is address
 * 0x10 (a free that followed it would crash the manager); indirect marks it
 * RTE_MBUF_F_INDIRECT with a priv_size that makes the mbuf it would detach
 * from the one before it in the pool (a double free). Both drop the packet.
 * decoy, truncate and outport go on for every packet: decoy hands each back
 * with packet_type ARP and header lengths 0 (a later hop that trusted them
 * would skip its IP rules), truncate with 10 bytes (no Ethernet frame),
 * outport with the verdict OUT to the port named good_out.
 * shmalloc is alloc with shared anonymous mappings (RLIMIT_DATA does not
 * count them); hugealloc maps huge pages of its own, 2 MiB at a time, up
 * to 64 MiB.
 *
 * rekey, unlike the others, goes on for every packet from the NF's second:
 * it rewrites an IPv4 UDP/TCP packet's source to the generator's
 * neighbouring flow (the last address byte and the port with their lowest
 * bit flipped: flow 2k <-> 2k+1) and returns it sq_rekeyed(), claiming that
 * flow's tuple as its own flow's second key (the manager must refuse a tuple
 * that is already a flow's key).
 *
 * allocmeta writes 0xff over the 128 bytes before its own tx ring, where an
 * allocator that keeps its records in the memory it hands out (DPDK's malloc
 * heap) has the ring's element header, which the manager's free of the ring
 * reads, and exits.
 *
 * claimnext goes on for every packet too: it moves a TCP packet's source
 * port one up (the port the generator's next connection uses) and returns
 * it sq_rekeyed(), claiming a connection that does not exist yet (the
 * manager must not give that connection's SYN to this NF's flow).
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
#include <inttypes.h>
#include <sys/ioctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
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

/* alloc's steps as mappings: shared anonymous memory (what RLIMIT_DATA
 * does not count), or huge pages of its own (MAP_HUGETLB, 2 MiB each, up
 * to 64 MiB). */
static void
map_unbounded(bool huge)
{
	size_t step = huge ? (2u << 20) : ALLOC_STEP;
	unsigned int max = huge ? 32 : ALLOC_MAX, n;
	int err = 0;

	for (n = 0; n < max; n++) {
		void *p = mmap(NULL, step, PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_ANONYMOUS | (huge ? MAP_HUGETLB : 0), -1, 0);

		if (p == MAP_FAILED) {
			err = errno;
			break;
		}
		memset(p, 1, step); /* (kept: the point is to hold it) */
	}
	if (n == 0 && err != 0) {
		errno = err;
		say(0);
		return;
	}
	fprintf(stderr, NF_NAME ": %s: %s at %u MiB\n", what, n == max ? "succeeded" : "stopped",
		(unsigned int)(n * (step >> 20)));
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

/* allocmeta: the 128 bytes before its own tx ring (DPDK's malloc heap kept
 * the ring's element header there), then it leaves: it reads its rings no
 * more, whatever those bytes were. */
static void
scribble_before_ring(struct sq_nf *nf)
{
	struct sq_region_hdr *hdr = sq_nf_region(nf);
	const struct sq_nf_ctl *ctl = sq_nf_ctl(nf);
	char *tx = (char *)hdr + ctl->tx_ring_off;

	memset(tx - 128, 0xff, 128);
	fprintf(stderr, NF_NAME ": allocmeta: succeeded: scribbled before its tx ring\n");
	_exit(0);
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

/* The type of descriptor @p fd, or NULL if it is not open. */
static const char *
fd_type(int fd)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return NULL;
	return S_ISCHR(st.st_mode)    ? "chr"
	       : S_ISFIFO(st.st_mode) ? "fifo"
	       : S_ISSOCK(st.st_mode) ? "sock"
	       : S_ISREG(st.st_mode)  ? "reg"
	       : S_ISDIR(st.st_mode)  ? "dir"
				      : "other";
}

#define FDS_SCAN 4096

static void
list_fds(void)
{
	char out[4096] = "";
	size_t len = 0;

	for (int fd = 0; fd < FDS_SCAN && len < sizeof(out) - 32; fd++) {
		const char *t = fd_type(fd);

		if (t != NULL)
			len += (size_t)snprintf(out + len, sizeof(out) - len, "%s%d:%s",
						len ? " " : "", fd, t);
	}
	fprintf(stderr, NF_NAME ": fds: listed: %s\n", out);
}

static void
type_into_terminals(void)
{
	const char c = '#';
	int ok = 0, fd;

	for (fd = 0; fd < FDS_SCAN && !ok; fd++)
		if (fd_type(fd) != NULL)
			ok = ioctl(fd, TIOCSTI, &c) == 0;
	if (!ok) {
		int saved = errno;

		fd = open("/dev/tty", O_RDWR | O_NOCTTY);
		if (fd >= 0) {
			ok = ioctl(fd, TIOCSTI, &c) == 0;
			close(fd);
		} else {
			errno = saved;
		}
	}
	say(ok);
}

static void
find_socket(void)
{
	int n = 0;

	for (int fd = 0; fd < FDS_SCAN; fd++) {
		const char *t = fd_type(fd);

		n += t != NULL;
		if (t != NULL && strcmp(t, "sock") == 0) {
			fprintf(stderr, NF_NAME ": accept: succeeded: a socket at fd %d\n", fd);
			return;
		}
	}
	fprintf(stderr, NF_NAME ": accept: failed: no socket among %d descriptors\n", n);
}

static void
read_other_mem(void)
{
	pid_t pid = victim();
	char path[64];
	uint64_t word;
	int fd;

	if (pid < 0) {
		errno = ESRCH;
		say(0);
		return;
	}
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	fd = open(path, O_RDONLY);
	say(fd >= 0 &&
	    pread(fd, &word, sizeof(word), (off_t)SQ_REGION_BASE_ADDR) == (ssize_t)sizeof(word));
	if (fd >= 0)
		close(fd);
}

#define BOGUS_PID 0x3ffffff0

static void *
rewrite_mgr_pid(void *arg)
{
	struct sq_region_hdr *hdr = arg;
	uint64_t until = now_ms() + 4000, n = 0;

	while (now_ms() < until) {
		__atomic_store_n(&hdr->mgr_pid, BOGUS_PID, __ATOMIC_RELAXED);
		n++;
		usleep(100);
	}
	fprintf(stderr, NF_NAME ": mgrpid: succeeded: rewrote it %" PRIu64 " times\n", n);
	return NULL;
}

static void
bogus_mgr_pid(struct sq_nf *nf)
{
	pthread_t t;

	errno = pthread_create(&t, NULL, rewrite_mgr_pid, sq_nf_region(nf));
	if (errno != 0)
		say(0);
	else
		pthread_detach(t);
}

/* The packet back with a header that would make a free follow it
 * elsewhere. */
static void
foreign_buffer(struct rte_mbuf *m, bool external)
{
	if (external) {
		struct rte_mbuf_ext_shared_info *shinfo =
			(struct rte_mbuf_ext_shared_info *)((char *)m->buf_addr + 64);

		shinfo->free_cb = (rte_mbuf_extbuf_free_callback_t)(uintptr_t)0x10;
		shinfo->fcb_opaque = NULL;
		rte_mbuf_ext_refcnt_set(shinfo, 1);
		m->shinfo = shinfo;
		m->ol_flags |= RTE_MBUF_F_EXTERNAL;
	} else {
		/* (the mbuf before it: its header and private area, then ours) */
		m->priv_size = (uint16_t)(m->priv_size + sizeof(*m) + m->buf_len);
		m->ol_flags |= RTE_MBUF_F_INDIRECT;
	}
	sq_pkt_set_verdict(m, SQ_DROP);
	fprintf(stderr, NF_NAME ": %s: succeeded: handed back\n", what);
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
	} else if (strcmp(what, "shmalloc") == 0 || strcmp(what, "hugealloc") == 0) {
		map_unbounded(strcmp(what, "hugealloc") == 0);
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
	} else if (strcmp(what, "allocmeta") == 0) {
		scribble_before_ring(nf);
	} else if (strcmp(what, "snoop") == 0) {
		snoop(nf);
	} else if (strcmp(what, "ctl") == 0) {
		other_ctls(nf);
	} else if (strcmp(what, "fds") == 0) {
		list_fds();
	} else if (strcmp(what, "tiocsti") == 0) {
		type_into_terminals();
	} else if (strcmp(what, "accept") == 0) {
		find_socket();
	} else if (strcmp(what, "procmem") == 0) {
		read_other_mem();
	} else if (strcmp(what, "mgrpid") == 0) {
		bogus_mgr_pid(nf);
	} else if (strcmp(what, "extbuf") == 0 || strcmp(what, "indirect") == 0) {
		foreign_buffer(m, strcmp(what, "extbuf") == 0);
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

/* claimnext: the source port one up, the next generator connection's. */
static void
claim_next(struct rte_mbuf *m)
{
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	rte_be16_t *sport = (rte_be16_t *)((uint8_t *)ip + rte_ipv4_hdr_len(ip));

	if (eth->ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) ||
	    ip->next_proto_id != IPPROTO_TCP)
		return;
	*sport = rte_cpu_to_be_16((uint16_t)(rte_be_to_cpu_16(*sport) + 1));
	sq_pkt_set_verdict(m, sq_rekeyed(SQ_NEXT));
}

/* decoy, truncate, outport: every packet, said once. */
static bool
rewrite_all(struct sq_nf *nf, struct rte_mbuf **pkts, uint16_t n)
{
	static int out_port = -2;
	const struct sq_region_hdr *hdr = sq_nf_region(nf);

	if (strcmp(what, "decoy") != 0 && strcmp(what, "truncate") != 0 &&
	    strcmp(what, "outport") != 0)
		return false;
	if (out_port == -2) {
		out_port = -1;
		for (uint32_t p = 0; p < hdr->n_ports && p < 16; p++)
			if (strcmp(hdr->port_names[p], "good_out") == 0)
				out_port = (int)p;
		fprintf(stderr, NF_NAME ": %s: succeeded: every packet\n", what);
	}
	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];

		if (strcmp(what, "decoy") == 0) {
			/* a header that says ARP: the next hop would skip its IP rules */
			m->packet_type = RTE_PTYPE_L2_ETHER_ARP;
			m->l2_len = 0;
			m->l3_len = 0;
		} else if (strcmp(what, "truncate") == 0) {
			m->data_len = 10;
			m->pkt_len = 10;
		} else if (out_port >= 0) {
			sq_pkt_set_verdict(m, sq_out((uint16_t)out_port));
		}
	}
	return true;
}

static void
burst(struct rte_mbuf **pkts, uint16_t n, void *arg)
{
	static uint64_t seen;

	if (what != NULL && rewrite_all(arg, pkts, n))
		return;

	if (what != NULL && strcmp(what, "rekey") == 0) {
		for (uint16_t i = 0; i < n; i++)
			if (seen++ > 0)
				claim_neighbour(pkts[i]);
		return;
	}
	if (what != NULL && strcmp(what, "claimnext") == 0) {
		for (uint16_t i = 0; i < n; i++)
			claim_next(pkts[i]);
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
		fprintf(stderr, NF_NAME
			": --try socket|fork|ptrace|kill|setuid|mount|alloc|pool|"
			"region|peek|poke|snoop|ctl|ring|spin|threads|rekey|claimnext|allocmeta|"
			"fds|tiocsti|accept|procmem|mgrpid|extbuf|indirect|shmalloc|hugealloc|"
			"decoy|truncate|outport "
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
