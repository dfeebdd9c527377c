/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-aes: the AES encryptor of FlexNFV's chain (seed 003 §V: monitor ->
 * forwarder -> AES encryptor). Encrypts the L4 payload of each IPv4 TCP or
 * UDP packet in place with AES-CTR (OpenSSL's libcrypto; this NF links it and
 * no DPDK library), so a packet keeps its length and its headers; anything
 * else passes unchanged and is counted.
 *
 * The counter block of a packet is taken from its own headers (IPv4 source,
 * destination, identification, protocol; L4 ports; and, for TCP, the
 * sequence number), so the receiver of a packet, knowing the key, decrypts it
 * by running this NF again (CTR is its own inverse). Headers that repeat give
 * a counter block that repeats: this NF measures what encryption costs an NF
 * chain, as FlexNFV's does; it is not a VPN.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>

#include <rte_byteorder.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_tcp.h>
#include <rte_udp.h>

#include <squall/pkt.h>
#include <squall/squall.h>

#include "../nf_opt.h"
#include "../nf_wait.h"

#define NF_NAME "squall-nf-aes"

struct aes {
	struct sq_nf *nf;
	EVP_CIPHER_CTX *ctx;
	struct nf_wait wait;
	int pkts_idx;    /* encrypted */
	int bytes_idx;   /* payload bytes encrypted */
	int skipped_idx; /* passed as they were: not IPv4 TCP/UDP, or no payload */
	int failed_idx;  /* libcrypto said no: dropped */
};

static void
usage(FILE *f)
{
	fprintf(f, "Usage: " NF_NAME " --key-file FILE [--wait-ns NS]\n"
		   "Encrypt the L4 payload of IPv4 TCP and UDP packets in place with\n"
		   "AES-CTR (the key's length picks AES-128 or AES-256); other packets\n"
		   "pass unchanged. Running it again with the same key decrypts.\n"
		   "Counters: aes_pkts, aes_bytes, aes_skipped, aes_failed (dropped).\n"
		   "\n"
		   "  --key-file FILE  16 or 32 bytes of key: raw, or as 32 or 64 hex digits\n"
		   "                   (a trailing newline is ignored)\n"
		   "  --wait-ns NS     also wait NS per packet, asleep: an encryptor that\n"
		   "                   hands each packet to a crypto device (default "
		   "0)\n" NF_OPT_COMMON_HELP);
}

static int
hex_value(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static bool
all_hex(const uint8_t *buf, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (hex_value(buf[i]) < 0)
			return false;
	return true;
}

/* @return the key's length (16 or 32), or -1 with a message. 32 hex digits
 * are a 16-byte key, not a 32-byte raw one. */
static int
read_key(const char *path, uint8_t key[32])
{
	uint8_t buf[130];
	size_t n;
	FILE *f;

	f = fopen(path, "rb");
	if (f == NULL) {
		fprintf(stderr, NF_NAME ": --key-file %s: %s\n", path, strerror(errno));
		return -1;
	}
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	if ((n == 32 || n == 64) && all_hex(buf, n)) {
		for (size_t i = 0; i < n / 2; i++)
			key[i] = (uint8_t)(hex_value(buf[2 * i]) << 4 | hex_value(buf[2 * i + 1]));
		return (int)(n / 2);
	}
	if (n == 16 || n == 32) {
		memcpy(key, buf, n);
		return (int)n;
	}
	fprintf(stderr,
		NF_NAME ": --key-file %s: expected 16 or 32 raw bytes, or 32 or 64 hex "
			"digits; got %zu bytes\n",
		path, n);
	return -1;
}

/* Where the packet's payload starts (an offset in the packet: it may run on
 * into later segments of a jumbo frame) and its counter block, or false if
 * it has none. */
static bool
payload_of(struct rte_mbuf *pkt, uint32_t *off, uint32_t *len, uint8_t iv[16])
{
	struct rte_ipv4_hdr *ip = sq_pkt_ipv4(pkt);
	uint32_t ip_len, hdr_len, l4_len, end;
	const uint8_t *dst;
	uint8_t *l4;

	if (ip == NULL || (ip->next_proto_id != IPPROTO_TCP && ip->next_proto_id != IPPROTO_UDP))
		return false;
	hdr_len = rte_ipv4_hdr_len(ip);
	ip_len = rte_be_to_cpu_16(ip->total_length);
	/* the manager checked the IPv4 header; the payload ends at the IP
	 * total length, not at pkt_len (Ethernet padding is not payload) */
	end = pkt->l2_len + ip_len;
	if (ip_len < hdr_len || end > pkt->pkt_len)
		return false;
	l4 = (uint8_t *)ip + hdr_len;
	if (ip->next_proto_id == IPPROTO_TCP) {
		const struct rte_tcp_hdr *tcp = (const struct rte_tcp_hdr *)l4;

		/* (the TCP header is in the first segment: squall/pkt.h) */
		if (ip_len < hdr_len + sizeof(*tcp) ||
		    pkt->data_len < pkt->l2_len + hdr_len + sizeof(*tcp))
			return false;
		l4_len = (uint32_t)(tcp->data_off >> 4) * 4;
		memcpy(iv + 8, &tcp->sent_seq, 4);
	} else {
		if (pkt->data_len < pkt->l2_len + hdr_len + sizeof(struct rte_udp_hdr))
			return false;
		l4_len = sizeof(struct rte_udp_hdr);
		memset(iv + 8, 0, 4);
	}
	if (l4_len < sizeof(struct rte_udp_hdr) || ip_len <= hdr_len + l4_len)
		return false;
	/* bytes as they are on the wire: source address, the destination's
	 * first byte with the protocol, the IP id, the destination's last byte,
	 * (TCP sequence number,) both ports */
	dst = (const uint8_t *)&ip->dst_addr;
	memcpy(iv, &ip->src_addr, 4);
	iv[4] = dst[0] ^ ip->next_proto_id;
	memcpy(iv + 5, &ip->packet_id, 2);
	iv[7] = dst[3];
	memcpy(iv + 12, l4, 4);
	*off = pkt->l2_len + hdr_len + l4_len;
	*len = ip_len - hdr_len - l4_len;
	return true;
}

/* Encrypt @p len bytes of @p pkt in place from offset @p off, segment by
 * segment: CTR mode carries its keystream position from one update to the
 * next, so a jumbo frame is encrypted as if it were one buffer. */
static bool
crypt_segments(struct aes *a, struct rte_mbuf *pkt, uint32_t off, uint32_t len)
{
	for (struct rte_mbuf *seg = pkt; seg != NULL && len > 0; seg = seg->next) {
		uint8_t *data;
		uint32_t n;
		int out;

		if (off >= seg->data_len) {
			off -= seg->data_len;
			continue;
		}
		n = RTE_MIN(len, (uint32_t)seg->data_len - off);
		data = rte_pktmbuf_mtod_offset(seg, uint8_t *, off);
		if (EVP_EncryptUpdate(a->ctx, data, &out, data, (int)n) != 1 || (uint32_t)out != n)
			return false;
		len -= n;
		off = 0;
	}
	return len == 0;
}

static sq_verdict_t
aes_pkt(struct rte_mbuf *pkt, void *arg)
{
	struct aes *a = arg;
	uint32_t off, len;
	uint8_t iv[16];

	if (!payload_of(pkt, &off, &len, iv)) {
		sq_nf_counter_add(a->nf, a->skipped_idx, 1);
		return SQ_NEXT;
	}
	if (EVP_EncryptInit_ex(a->ctx, NULL, NULL, NULL, iv) != 1 ||
	    !crypt_segments(a, pkt, off, len)) {
		sq_nf_counter_add(a->nf, a->failed_idx, 1);
		return SQ_DROP;
	}
	sq_nf_counter_add(a->nf, a->pkts_idx, 1);
	sq_nf_counter_add(a->nf, a->bytes_idx, len);
	nf_wait_pkt(&a->wait);
	return SQ_NEXT;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"key-file", required_argument, NULL, 'k'},
		{"wait-ns", required_argument, NULL, 'w'},
		NF_OPT_COMMON_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	static struct aes a;
	const char *key_file = NULL;
	uint64_t wait_ns = 0;
	uint8_t key[32];
	int opt, ret, key_len;
	struct sq_nf *nf;

	while ((opt = getopt_long(argc, argv, NF_OPT_SHORT, longopts, NULL)) != -1) {
		switch (opt) {
		case 'k': key_file = optarg; break;
		case 'w':
			if (nf_opt_u64(NF_NAME, "wait-ns", optarg, 0, 100000000, &wait_ns) < 0)
				return NF_EXIT_USAGE;
			break;
		case 'h': usage(stdout); return NF_EXIT_OK;
		case 0: /* for sq_nf_init() */ break;
		default: return nf_opt_usage_error(NF_NAME);
		}
	}
	ret = nf_opt_check_done(NF_NAME, argc, argv);
	if (ret != 0)
		return ret;
	if (key_file == NULL) {
		fprintf(stderr, NF_NAME ": --key-file is required\n");
		return nf_opt_usage_error(NF_NAME);
	}
	key_len = read_key(key_file, key);
	if (key_len < 0)
		return NF_EXIT_USAGE;
	a.ctx = EVP_CIPHER_CTX_new();
	if (a.ctx == NULL ||
	    EVP_EncryptInit_ex(a.ctx, key_len == 32 ? EVP_aes_256_ctr() : EVP_aes_128_ctr(), NULL,
			       key, NULL) != 1) {
		fprintf(stderr, NF_NAME ": libcrypto cannot set up AES-CTR\n");
		return NF_EXIT_FAIL;
	}
	memset(key, 0, sizeof(key));

	ret = nf_opt_attach(argc, argv, &nf);
	if (ret != 0)
		return ret;
	a.nf = nf;
	nf_wait_init(&a.wait, wait_ns);
	a.pkts_idx = sq_nf_counter_register(nf, "aes_pkts");
	a.bytes_idx = sq_nf_counter_register(nf, "aes_bytes");
	a.skipped_idx = sq_nf_counter_register(nf, "aes_skipped");
	a.failed_idx = sq_nf_counter_register(nf, "aes_failed");
	/* No state per flow: the key schedule is the NF's, the counter block the
	 * packet's, so one NF serves shared instances and per-flow pools alike. */
	sq_nf_set_pkt_handler(nf, aes_pkt, &a);
	ret = sq_nf_run(nf);
	EVP_CIPHER_CTX_free(a.ctx);
	return ret < 0 ? NF_EXIT_FAIL : NF_EXIT_OK;
}
