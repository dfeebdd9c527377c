/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-dpi: payload pattern matching with Vectorscan (libhs; Debian's
 * libvectorscan-dev, the maintained open fork of Intel's Hyperscan, which
 * stopped at 5.4 in Debian; nDPI classifies protocols, not user patterns).
 * Rules from a file, each a regular expression with an action: drop (the
 * packet and the rest of its flow) or tag (the rule's id in the packet's
 * metadata user[1], for a later NF). Packets are scanned one at a time
 * (block mode): a pattern split across two segments is not seen.
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <hs.h>
#include <rte_cycles.h>
#include <rte_mbuf.h>

#include <squall/log.h>
#include <squall/squall.h>

#include "../conntrack/ct_parse.h"
#include "../nf_opt.h"

#define NF_NAME       "squall-nf-dpi"
#define MAX_RULES     256
#define RULE_COUNTERS 5 /* matches of the first five rules; SQ_NF_COUNTERS is 8 */
#define BLOCKED_SLOTS 4096
#define BLOCKED_MS    60000 /* a dropped flow stays dropped this long after its last packet */

enum dpi_action {
	DPI_DROP,
	DPI_TAG,
};

struct dpi {
	struct sq_nf *nf;
	hs_database_t *db;
	hs_scratch_t *scratch;
	unsigned int n_rules;
	unsigned int id[MAX_RULES];
	enum dpi_action action[MAX_RULES];
	int rule_ctr[RULE_COUNTERS];
	int dropped_ctr, tagged_ctr, bad_hdr_ctr;
	/* Flows a drop rule matched, by the manager's symmetric flow hash
	 * (hash + 1; 0 = empty), with when they were last seen. */
	uint32_t blocked[BLOCKED_SLOTS];
	uint64_t blocked_until_ms[BLOCKED_SLOTS];
	uint64_t tsc_per_ms;
	/* a jumbo frame's payload, gathered from its segments to be scanned */
	uint8_t gather[SQ_MAX_FRAME_BYTES];
};

static void
usage(FILE *f)
{
	fprintf(f, "Usage: " NF_NAME " --rules FILE\n"
		   "Match packet payloads (TCP and UDP payload, other IP protocols from the L4\n"
		   "header on) against regular expressions with Vectorscan. The first rule that\n"
		   "matches decides: drop drops the packet and every later packet of its flow\n"
		   "(both directions); tag writes the rule's id in the metadata's user[1] and\n"
		   "passes it. Counters: r<ID> (matches of the first five rules), dropped,\n"
		   "tagged, bad_hdr (truncated or fragment: dropped).\n"
		   "\n"
		   "  --rules FILE   one rule a line: ID drop|tag /REGEX/[i][s]; # comments.\n"
		   "                 e.g.  1 drop /evil-payload/i\n" NF_OPT_COMMON_HELP);
}

static int
load_rules(struct dpi *d, const char *path)
{
	static char *expr[MAX_RULES];
	unsigned int flags[MAX_RULES], lineno = 0, n = 0, i;
	char line[1024], act[8], *p, *end;
	hs_compile_error_t *err = NULL;
	unsigned long id;
	int ret = -EINVAL;
	FILE *f;

	f = fopen(path, "r");
	if (f == NULL) {
		fprintf(stderr, NF_NAME ": --rules %s: %s\n", path, strerror(errno));
		return -errno;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		lineno++;
		line[strcspn(line, "\r\n")] = '\0';
		p = line + strspn(line, " \t");
		if (*p == '\0' || *p == '#')
			continue;
		if (n == MAX_RULES) {
			fprintf(stderr, NF_NAME ": %s:%u: more than %d rules\n", path, lineno,
				MAX_RULES);
			goto out;
		}
		id = strtoul(p, &end, 10);
		if (end == p || sscanf(end, " %7s", act) != 1 ||
		    (strcmp(act, "drop") != 0 && strcmp(act, "tag") != 0)) {
			fprintf(stderr, NF_NAME ": %s:%u: expected ID drop|tag /REGEX/\n", path,
				lineno);
			goto out;
		}
		p = strchr(end, '/');
		end = p != NULL ? strrchr(p, '/') : NULL;
		if (p == NULL || end == p) {
			fprintf(stderr, NF_NAME ": %s:%u: no /REGEX/\n", path, lineno);
			goto out;
		}
		flags[n] = HS_FLAG_SINGLEMATCH;
		for (i = 1; end[i] != '\0' && end[i] != ' '; i++) {
			if (end[i] == 'i')
				flags[n] |= HS_FLAG_CASELESS;
			else if (end[i] == 's')
				flags[n] |= HS_FLAG_DOTALL;
			else {
				fprintf(stderr, NF_NAME ": %s:%u: unknown flag '%c'\n", path,
					lineno, end[i]);
				goto out;
			}
		}
		expr[n] = strndup(p + 1, (size_t)(end - p - 1));
		d->id[n] = (unsigned int)id;
		d->action[n] = strcmp(act, "drop") == 0 ? DPI_DROP : DPI_TAG;
		n++;
	}
	if (n == 0) {
		fprintf(stderr, NF_NAME ": %s: no rules\n", path);
		goto out;
	}
	/* The rule's index is Vectorscan's id: the first match reported wins. */
	{
		unsigned int ids[MAX_RULES];

		for (i = 0; i < n; i++)
			ids[i] = i;
		if (hs_compile_multi((const char *const *)expr, flags, ids, n, HS_MODE_BLOCK, NULL,
				     &d->db, &err) != HS_SUCCESS) {
			fprintf(stderr, NF_NAME ": %s: rule %d: %s\n", path,
				err->expression >= 0 ? (int)d->id[err->expression] : -1,
				err->message);
			hs_free_compile_error(err);
			goto out;
		}
	}
	if (hs_alloc_scratch(d->db, &d->scratch) != HS_SUCCESS) {
		fprintf(stderr, NF_NAME ": no memory for Vectorscan's scratch\n");
		ret = -ENOMEM;
		goto out;
	}
	d->n_rules = n;
	ret = 0;
out:
	for (i = 0; i < n; i++)
		free(expr[i]);
	fclose(f);
	return ret;
}

/* Keep the lowest-numbered (first in the file) rule that matched. */
static int
on_match(unsigned int id, unsigned long long from, unsigned long long to, unsigned int flags,
	 void *ctx)
{
	int *best = ctx;

	RTE_SET_USED(from);
	RTE_SET_USED(to);
	RTE_SET_USED(flags);
	if (*best < 0 || (int)id < *best)
		*best = (int)id;
	return 0;
}

static inline bool
is_blocked(struct dpi *d, uint32_t hash, uint64_t now_ms)
{
	uint32_t i = hash % BLOCKED_SLOTS;

	if (d->blocked[i] != hash + 1 || now_ms >= d->blocked_until_ms[i])
		return false;
	d->blocked_until_ms[i] = now_ms + BLOCKED_MS;
	return true;
}

static inline sq_verdict_t
dpi_one(struct dpi *d, struct rte_mbuf *pkt, uint64_t now_ms, uint64_t *rule_ctr, uint64_t *ctr)
{
	const uint8_t *frame = rte_pktmbuf_mtod(pkt, const uint8_t *), *payload;
	struct sq_pkt_meta *m = sq_pkt_meta(pkt);
	uint32_t l4_len, off, len;
	struct ct_hdrs h;
	struct ct_pkt p;
	int ret, best = -1;

	ret = ct_parse_pkt(pkt, 0, &p, &h);
	if (ret == CT_PARSE_NOT_IP || ret == CT_PARSE_UNTRACKED)
		return SQ_NEXT;
	if (unlikely(ret != 0)) {
		ctr[2]++;
		return SQ_DROP;
	}
	if (is_blocked(d, m->flow_hash, now_ms)) {
		ctr[0]++;
		return SQ_DROP;
	}
	l4_len = h.l3_len - (h.l4_off - h.l3_off);
	if (p.key.proto == IPPROTO_TCP) {
		off = h.l4_off + l4_len - p.payload_len;
		len = p.payload_len;
	} else if (p.key.proto == IPPROTO_UDP) {
		off = h.l4_off + 8;
		len = l4_len - 8;
	} else {
		off = h.l4_off;
		len = l4_len;
	}
	if (len == 0)
		return SQ_NEXT;
	payload = off + len <= rte_pktmbuf_data_len(pkt) ? frame + off
							 : sq_pkt_read(pkt, off, len, d->gather);
	if (unlikely(payload == NULL)) {
		ctr[2]++;
		return SQ_DROP;
	}
	hs_scan(d->db, (const char *)payload, len, 0, d->scratch, on_match, &best);
	if (best < 0)
		return SQ_NEXT;
	if ((unsigned int)best < RULE_COUNTERS)
		rule_ctr[best]++;
	if (d->action[best] == DPI_TAG) {
		m->user[1] = d->id[best];
		ctr[1]++;
		return SQ_NEXT;
	}
	d->blocked[m->flow_hash % BLOCKED_SLOTS] = m->flow_hash + 1;
	d->blocked_until_ms[m->flow_hash % BLOCKED_SLOTS] = now_ms + BLOCKED_MS;
	ctr[0]++;
	return SQ_DROP;
}

static void
dpi_burst(struct rte_mbuf **pkts, uint16_t n_pkts, void *arg)
{
	struct dpi *d = arg;
	uint64_t rule_ctr[RULE_COUNTERS] = {0}, ctr[3] = {0};
	uint64_t now_ms = rte_rdtsc() / d->tsc_per_ms;
	unsigned int i;

	for (i = 0; i < n_pkts; i++)
		sq_pkt_set_verdict(pkts[i], dpi_one(d, pkts[i], now_ms, rule_ctr, ctr));
	for (i = 0; i < RULE_COUNTERS && i < d->n_rules; i++)
		if (rule_ctr[i] != 0)
			sq_nf_counter_add(d->nf, d->rule_ctr[i], rule_ctr[i]);
	if (ctr[0] != 0)
		sq_nf_counter_add(d->nf, d->dropped_ctr, ctr[0]);
	if (ctr[1] != 0)
		sq_nf_counter_add(d->nf, d->tagged_ctr, ctr[1]);
	if (ctr[2] != 0)
		sq_nf_counter_add(d->nf, d->bad_hdr_ctr, ctr[2]);
}

/* Per-flow: the flow ended, forget that it was dropped. */
static void
dpi_clean(void *arg)
{
	struct dpi *d = arg;

	memset(d->blocked, 0, sizeof(d->blocked));
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"rules", required_argument, NULL, 'f'},
		NF_OPT_COMMON_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	static struct dpi d;
	const char *rules = NULL;
	char name[SQ_NAME_LEN];
	struct sq_nf *nf;
	unsigned int i;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, NF_OPT_SHORT, longopts, NULL)) != -1) {
		switch (opt) {
		case 'f': rules = optarg; break;
		case 'h': usage(stdout); return NF_EXIT_OK;
		case 0: /* for sq_nf_init() */ break;
		default: return nf_opt_usage_error(NF_NAME);
		}
	}
	ret = nf_opt_check_done(NF_NAME, argc, argv);
	if (ret != 0)
		return ret;
	if (rules == NULL) {
		fprintf(stderr, NF_NAME ": --rules FILE is required (try --help)\n");
		return NF_EXIT_USAGE;
	}
	if (load_rules(&d, rules) < 0)
		return NF_EXIT_USAGE;
	ret = nf_opt_attach(argc, argv, &nf);
	if (ret != 0)
		return ret;
	d.nf = nf;
	d.tsc_per_ms = sq_nf_region(nf)->tsc_hz / 1000 ? sq_nf_region(nf)->tsc_hz / 1000 : 1;
	for (i = 0; i < RULE_COUNTERS && i < d.n_rules; i++) {
		snprintf(name, sizeof(name), "r%u", d.id[i]);
		d.rule_ctr[i] = sq_nf_counter_register(nf, name);
	}
	d.dropped_ctr = sq_nf_counter_register(nf, "dropped");
	d.tagged_ctr = sq_nf_counter_register(nf, "tagged");
	d.bad_hdr_ctr = sq_nf_counter_register(nf, "bad_hdr");
	sq_nf_set_burst_handler(nf, dpi_burst, &d);
	sq_nf_set_state_cleaner(nf, dpi_clean, &d);
	ret = sq_nf_run(nf);
	hs_free_scratch(d.scratch);
	hs_free_database(d.db);
	return ret < 0 ? NF_EXIT_FAIL : NF_EXIT_OK;
}
