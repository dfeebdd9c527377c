/* SPDX-License-Identifier: BSD-3-Clause
 * capfilter: a capture filter accepts in squall-mgr exactly what it accepts
 * in libpcap. Each expression is compiled once by libpcap; its own filter
 * (pcap_offline_filter) and the program capfilter_load makes of it, run by
 * DPDK's interpreter and by its JIT, must return the same value on every
 * frame: every prefix of each crafted frame (loads past the end), each in one
 * mbuf and split in two at every byte (loads across segments).
 *
 * The expressions cover each cBPF load: absolute and indirect ([x + k]) of a
 * byte, a half-word and a word, ldxb 4*([k]&0xf), len, and X from memory,
 * from len, from the packet and from arithmetic; jset masks of one and four
 * bytes. Without the rewrite in mgr/capfilter.c (DPDK 22.11's faults, named
 * there) tcp[13], icmp[0] and kin disagree, and the JIT's jset #2 and the
 * loads at X near 2^32 crash this test. DPDK's rte_malloc (in
 * rte_bpf_convert) needs the EAL: it runs with no hugepages, no shared files
 * and no devices.
 */
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <pcap/pcap.h>

#include <rte_bpf.h>
#include <rte_common.h>
#include <rte_eal.h>
#include <rte_mbuf.h>

#include "capfilter.h"

#include "check.h"
#include "eal_nohuge.h"

#define SNAPLEN   262144 /* capture.c's default */
#define FRAME_MAX 128

static const char *const filters[] = {
	/* absolute: half, byte, word (one with a negative immediate) */
	"ip",
	"arp",
	"ip[9] == 1",
	"ip[20] == 8",
	"ip src 10.0.0.1",
	"ip dst 192.168.1.2",
	"ether[12:4] == 0x08004500",
	/* ldxb 4*([14]&0xf), then a byte at [x + k] */
	"icmp[0] == 8",
	"icmp[icmptype] == icmp-echo",
	"icmp[icmptype] == icmp-echoreply",
	"tcp[13] & 2 != 0",
	"tcp[tcpflags] & tcp-syn != 0",
	"tcp[tcpflags] == tcp-syn|tcp-ack",
	/* ... a half-word at [x + k] */
	"udp port 53",
	"tcp dst port 80",
	"udp[4:2] > 16",
	/* ... a word at [x + k] */
	"tcp[4:4] == 1",
	"icmp[4:4] == 0x00010001",
	/* X from memory (st, ldx M[]) and arithmetic, then a word */
	"tcp[((tcp[12:1] & 0xf0) >> 2):4] = 0x47455420",
	/* len, and X from len (near 2^32 on a frame shorter than the subtrahend) */
	"len >= 60",
	"less 60",
	"greater 80",
	"ether[len - 1] == 0xee",
	"ether[len - 2:2] == 0xeeee",
	"ether[len - 4:4] == 0xeeeeeeee",
	/* X from the packet; offsets at and past 2^31 */
	"ether[ether[14] - 0x40] == 1",
	"ether[ip[12:4] - 0x0a000001 + 20] & 0x40 != 0",
	"icmp or ether[ip[16:4] - 0xc0a80103] == 0",
	"ip[9] == 1 or ether[0x80000000] == 0",
	"tcp[0xfffffff0] == 0 or udp",
	"tcp[0x7ffffff0:4] == 0 or udp",
	/* behind a VLAN tag, and IPv6 */
	"vlan and icmp[0] == 8",
	"vlan 7 and tcp[tcpflags] & tcp-syn != 0",
	"ip6 and ip6[53] & 2 != 0",
	"ip6 and tcp dst port 80",
	/* masks: one byte, four bytes, negative, and X */
	"ip[6] & 0x40 != 0",
	"ip[6:2] & 0x1fff != 0",
	"ip[16:4] & 0x80000000 != 0",
	"ip[16:4] > 0xc0000000",
	"tcp[13] & ip[9] != 0",
	/* arithmetic on X and A */
	"ip[2:2] - ((ip[0] & 0xf) << 2) > 20",
	"(ip[2:2] * 3 / 2 + 1) % 7 == 1",
	"(ip[8] | 0x100) ^ 0x1c0 == 0x80 and -ip[9] + 7 > 0",
};

struct frame {
	const char *name;
	uint8_t b[FRAME_MAX];
	uint32_t len;
};

static const uint8_t icmp_echo[] = {8, 0, 0, 0, 0, 1, 0, 1};
static const uint8_t icmp_reply[] = {0, 0, 0, 0, 0, 1, 0, 1};
static const uint8_t tcp_syn[] = {0x30, 0x39, 0,    80,   0,    0,    0, 1, 0, 0,
				  0,    0,    0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0};
static const uint8_t tcp_synack[] = {0, 80, 0x30, 0x39, 0,    0,    0, 7, 0, 0,
				     0, 2,  0x50, 0x12, 0xff, 0xff, 0, 0, 0, 0};
static const uint8_t tcp_get[] = {0x30, 0x3a, 0,    80,   0, 0, 0, 2, 0,   0,   0,   8,
				  0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0, 'G', 'E', 'T', ' '};
/* data offset 8: 12 bytes of TCP options (NOPs) before the payload */
static const uint8_t tcp_get_opts[] = {0x30, 0x3b, 0,    80,   0, 0, 0, 3, 0,   0,   0,   9,
				       0x80, 0x18, 0xff, 0xff, 0, 0, 0, 0, 1,   1,   1,   1,
				       1,    1,    1,    1,    1, 1, 1, 1, 'G', 'E', 'T', ' '};
static const uint8_t udp_dns[] = {0x30, 0x39, 0, 53, 0, 16, 0, 0};
static const uint8_t udp_mdns[] = {0x14, 0xe9, 0x14, 0xe9, 0, 24, 0, 0};

static struct frame frames[32];
static unsigned int n_frames;

static size_t
put_eth(uint8_t *p, bool vlan, uint16_t type)
{
	static const uint8_t macs[12] = {2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2};
	size_t n = 12;

	memcpy(p, macs, sizeof(macs));
	if (vlan) {
		static const uint8_t tag[4] = {0x81, 0x00, 0x00, 0x07};

		memcpy(p + n, tag, sizeof(tag));
		n += sizeof(tag);
	}
	p[n] = type >> 8;
	p[n + 1] = type & 0xff;
	return n + 2;
}

/* An IPv4 frame: @p ihl words of header (NOP options past 5), flags and
 * fragment offset @p frag, then @p l4 and @p pad bytes of 0xee. */
static void
add_ipv4(const char *name, bool vlan, unsigned int ihl, uint16_t frag, uint8_t proto,
	 const uint8_t *l4, size_t l4_len, size_t pad)
{
	static const uint8_t addrs[8] = {10, 0, 0, 1, 192, 168, 1, 2};
	struct frame *f = &frames[n_frames++];
	size_t n = put_eth(f->b, vlan, 0x0800), hl = ihl * 4, ip_len = hl + l4_len + pad;
	uint8_t *ip = f->b + n;

	memset(ip, 0, hl);
	ip[0] = 0x40 | ihl;
	ip[2] = ip_len >> 8;
	ip[3] = ip_len & 0xff;
	ip[6] = frag >> 8;
	ip[7] = frag & 0xff;
	ip[8] = 64;
	ip[9] = proto;
	memcpy(ip + 12, addrs, sizeof(addrs));
	memset(ip + 20, 1, hl - 20);
	memcpy(ip + hl, l4, l4_len);
	memset(ip + hl + l4_len, 0xee, pad);
	f->name = name;
	f->len = n + ip_len;
}

static void
make_frames(void)
{
	struct frame *f;
	size_t n;

	add_ipv4("icmp echo", false, 5, 0, 1, icmp_echo, sizeof(icmp_echo), 0);
	add_ipv4("icmp echo reply", false, 5, 0, 1, icmp_reply, sizeof(icmp_reply), 0);
	add_ipv4("icmp echo, IHL 6", false, 6, 0, 1, icmp_echo, sizeof(icmp_echo), 0);
	add_ipv4("icmp echo, DF", false, 5, 0x4000, 1, icmp_echo, sizeof(icmp_echo), 4);
	add_ipv4("icmp echo, a later fragment", false, 5, 0x0001, 1, icmp_echo, sizeof(icmp_echo),
		 0);
	add_ipv4("icmp echo reply, IHL 15", false, 15, 0x4000, 1, icmp_reply, sizeof(icmp_reply),
		 0);
	add_ipv4("tcp syn", false, 5, 0, 6, tcp_syn, sizeof(tcp_syn), 0);
	add_ipv4("tcp syn, DF, padded", false, 5, 0x4000, 6, tcp_syn, sizeof(tcp_syn), 6);
	add_ipv4("tcp syn-ack, IHL 6, DF", false, 6, 0x4000, 6, tcp_synack, sizeof(tcp_synack), 0);
	add_ipv4("tcp GET, DF", false, 5, 0x4000, 6, tcp_get, sizeof(tcp_get), 0);
	add_ipv4("tcp GET, TCP options, IHL 7", false, 7, 0, 6, tcp_get_opts, sizeof(tcp_get_opts),
		 20);
	add_ipv4("udp 53", false, 5, 0, 17, udp_dns, sizeof(udp_dns), 8);
	add_ipv4("udp 53, IHL 8, DF", false, 8, 0x4000, 17, udp_dns, sizeof(udp_dns), 8);
	add_ipv4("udp 5353", false, 5, 0, 17, udp_mdns, sizeof(udp_mdns), 16);
	add_ipv4("vlan 7 icmp echo", true, 5, 0, 1, icmp_echo, sizeof(icmp_echo), 0);
	add_ipv4("vlan 7 tcp syn, IHL 6", true, 6, 0x4000, 6, tcp_syn, sizeof(tcp_syn), 0);

	f = &frames[n_frames++];
	f->name = "ipv6 tcp syn";
	n = put_eth(f->b, false, 0x86dd);
	memset(f->b + n, 0, 40);
	f->b[n] = 0x60;
	f->b[n + 5] = sizeof(tcp_syn);
	f->b[n + 6] = 6;
	f->b[n + 7] = 64;
	f->b[n + 23] = 1;
	f->b[n + 39] = 2;
	memcpy(f->b + n + 40, tcp_syn, sizeof(tcp_syn));
	f->len = n + 40 + sizeof(tcp_syn);

	f = &frames[n_frames++];
	f->name = "arp";
	n = put_eth(f->b, false, 0x0806);
	memset(f->b + n, 0xee, 28);
	f->len = n + 28;
}

/* An mbuf with its data in the same static block. */
struct seg {
	struct rte_mbuf m;
	uint8_t data[RTE_PKTMBUF_HEADROOM + FRAME_MAX];
};

static struct seg segs[2];

/* @p len bytes of @p p as one mbuf (@p split 0) or two, the first of
 * @p split bytes; the bytes past each segment's end are @p fill. */
static struct rte_mbuf *
mbuf_of(const uint8_t *p, uint32_t len, uint32_t split, uint8_t fill)
{
	uint32_t lens[2] = {split == 0 ? len : split, split == 0 ? 0 : len - split};

	for (unsigned int i = 0; i < 2; i++) {
		struct rte_mbuf *m = &segs[i].m;

		memset(m, 0, sizeof(*m));
		memset(segs[i].data, fill, sizeof(segs[i].data));
		m->buf_addr = segs[i].data;
		m->buf_len = sizeof(segs[i].data);
		m->data_off = RTE_PKTMBUF_HEADROOM;
		m->data_len = lens[i];
		m->pkt_len = lens[i];
		m->nb_segs = 1;
		memcpy(segs[i].data + RTE_PKTMBUF_HEADROOM, p + (i == 0 ? 0 : lens[0]), lens[i]);
	}
	if (split != 0) {
		segs[0].m.next = &segs[1].m;
		segs[0].m.nb_segs = 2;
		segs[0].m.pkt_len = len;
	}
	return &segs[0].m;
}

/* Every frame, every prefix, every split: libpcap's verdict, the
 * interpreter's and the JIT's. @return the disagreements (the first one
 * told). */
static unsigned int
compare(const char *expr, const struct bpf_program *prog, const struct rte_bpf *bpf,
	uint64_t (*jit)(void *))
{
	unsigned int bad = 0;

	for (unsigned int i = 0; i < n_frames; i++) {
		const struct frame *f = &frames[i];

		for (uint32_t len = 0; len <= f->len; len++) {
			struct pcap_pkthdr h = {.caplen = len, .len = len};
			uint64_t want = pcap_offline_filter(prog, &h, f->b);

			for (uint32_t split = 0; split < RTE_MAX(len, 1u); split++) {
				struct rte_mbuf *m =
					mbuf_of(f->b, len, split, len & 1 ? 0x08 : 0xff);
				uint64_t interp = rte_bpf_exec(bpf, m);
				uint64_t jitted = jit != NULL ? jit(m) : want;

				if (interp == want && jitted == want)
					continue;
				if (bad++ == 0)
					fprintf(stderr,
						"'%s' on %s, %u of %u bytes, split at %u: libpcap "
						"%" PRIu64 ", rte_bpf_exec %" PRIu64
						", JIT %" PRIu64 "\n",
						expr, f->name, len, f->len, split, want, interp,
						jitted);
			}
		}
	}
	return bad;
}

static void
test_filter(const char *expr)
{
	struct bpf_program prog;
	struct rte_bpf_jit jit = {0};
	struct rte_bpf *bpf;
	unsigned int matched = 0;
	char err[256];

	if (capfilter_compile(expr, SNAPLEN, &prog, err, sizeof(err)) != 0) {
		fprintf(stderr, "'%s': %s\n", expr, err);
		CHECK(false);
		return;
	}
	bpf = capfilter_load(&prog, err, sizeof(err));
	CHECK(bpf != NULL);
	if (bpf == NULL) {
		fprintf(stderr, "'%s': %s\n", expr, err);
		pcap_freecode(&prog);
		return;
	}
	CHECK(rte_bpf_get_jit(bpf, &jit) == 0);
#ifdef RTE_ARCH_X86_64
	CHECK(jit.func != NULL); /* what squall-mgr runs */
#endif
	/* The frames tell this filter's matches from its misses. */
	for (unsigned int i = 0; i < n_frames; i++) {
		struct pcap_pkthdr h = {.caplen = frames[i].len, .len = frames[i].len};

		matched += pcap_offline_filter(&prog, &h, frames[i].b) == SNAPLEN;
	}
	if (matched == 0 || matched == n_frames)
		fprintf(stderr, "'%s': libpcap matches %u of the %u frames\n", expr, matched,
			n_frames);
	CHECK(matched > 0 && matched < n_frames);
	CHECK(compare(expr, &prog, bpf, jit.func) == 0);
	rte_bpf_destroy(bpf);
	pcap_freecode(&prog);
}

int
main(int argc, char **argv)
{
	char err[256];
	struct bpf_program prog;

	(void)argc;
	if (eal_nohuge_init(argv[0]) < 0) {
		fprintf(stderr, "rte_eal_init failed\n");
		return 1;
	}
	make_frames();
	for (unsigned int i = 0; i < RTE_DIM(filters); i++)
		test_filter(filters[i]);
	/* what libpcap refuses is said, not loaded */
	err[0] = '\0';
	CHECK(capfilter_compile("tcp[", SNAPLEN, &prog, err, sizeof(err)) != 0 &&
	      strncmp(err, "filter: ", 8) == 0);
	rte_eal_cleanup();
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
