/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-monitor: count packets and bytes, print the rate every interval.
 * Everything passes on (NEXT).
 *
 * A burst handler: the counters are updated and the clock is read once per
 * burst, not per packet. A sleeping NF runs no handler while no packets come,
 * so an idle monitor prints nothing; the first line after a pause averages
 * over the whole pause.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>

#include <rte_cycles.h>
#include <rte_mbuf.h>

#include <squall/region.h>
#include <squall/squall.h>

#include "../nf_opt.h"

#define NF_NAME             "squall-nf-monitor"
#define INTERVAL_MS_DEFAULT 1000
#define INTERVAL_MS_MAX     (24 * 3600 * 1000)

struct monitor {
	struct sq_nf *nf;
	int pkts_idx;
	int bytes_idx;
	uint64_t tsc_hz;
	uint64_t interval_tsc; /* 0: never print */
	uint64_t last_tsc;     /* when the last line was printed */
	uint64_t last_pkts;    /* totals at last_tsc */
	uint64_t last_bytes;
	uint64_t pkts; /* totals; the NF counters hold the same */
	uint64_t bytes;
	char name[SQ_NAME_LEN + 16]; /* service#instance */
};

static void
usage(FILE *f)
{
	fprintf(f, "Usage: " NF_NAME " [--interval-ms MS]\n"
		   "Count packets and bytes (NF counters \"pkts\" and \"bytes\") and print\n"
		   "the rate to stderr. Every packet passes on to the next hop.\n"
		   "\n"
		   "  --interval-ms MS  print a rate line every MS ms while packets flow\n"
		   "                    and a total when it stops (default " RTE_STR(
			   INTERVAL_MS_DEFAULT) "; 0: never)\n" NF_OPT_COMMON_HELP);
}

static void
print_rate(struct monitor *mon, uint64_t now_tsc)
{
	double secs = (double)(now_tsc - mon->last_tsc) / (double)mon->tsc_hz;
	uint64_t pkts = mon->pkts - mon->last_pkts;
	uint64_t bytes = mon->bytes - mon->last_bytes;

	/* Bytes are the frames' L2 lengths (no preamble, no FCS). */
	fprintf(stderr,
		"monitor %s: %.0f pkt/s %.3f Mbit/s over %.3f s (total %" PRIu64 " pkts %" PRIu64
		" bytes)\n",
		mon->name, (double)pkts / secs, (double)bytes * 8 / secs / 1e6, secs, mon->pkts,
		mon->bytes);
	mon->last_tsc = now_tsc;
	mon->last_pkts = mon->pkts;
	mon->last_bytes = mon->bytes;
}

static void
monitor_burst(struct rte_mbuf **pkts, uint16_t n_pkts, void *arg)
{
	struct monitor *mon = arg;
	uint64_t bytes = 0;
	uint64_t now_tsc;
	uint16_t i;

	for (i = 0; i < n_pkts; i++)
		bytes += rte_pktmbuf_pkt_len(pkts[i]);
	sq_nf_counter_add(mon->nf, mon->pkts_idx, n_pkts);
	sq_nf_counter_add(mon->nf, mon->bytes_idx, bytes);
	mon->pkts += n_pkts;
	mon->bytes += bytes;

	if (mon->interval_tsc == 0)
		return;
	now_tsc = rte_rdtsc();
	if (unlikely(now_tsc - mon->last_tsc >= mon->interval_tsc))
		print_rate(mon, now_tsc);
}

static void
monitor_stop(void *arg)
{
	const struct monitor *mon = arg;

	fprintf(stderr, "monitor %s: stopped, total %" PRIu64 " pkts %" PRIu64 " bytes\n",
		mon->name, mon->pkts, mon->bytes);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"interval-ms", required_argument, NULL, 'i'},
		NF_OPT_COMMON_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	static struct monitor mon;
	uint64_t interval_ms = INTERVAL_MS_DEFAULT;
	const struct sq_nf_ctl *ctl;
	struct sq_nf *nf;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, NF_OPT_SHORT, longopts, NULL)) != -1) {
		switch (opt) {
		case 'i':
			if (nf_opt_u64(NF_NAME, "interval-ms", optarg, 0, INTERVAL_MS_MAX,
				       &interval_ms) < 0)
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

	ret = nf_opt_attach(argc, argv, &nf);
	if (ret != 0)
		return ret;
	ctl = sq_nf_ctl(nf);
	mon.nf = nf;
	snprintf(mon.name, sizeof(mon.name), "%.*s#%u", SQ_NAME_LEN, ctl->service, ctl->instance);
	mon.pkts_idx = sq_nf_counter_register(nf, "pkts");
	mon.bytes_idx = sq_nf_counter_register(nf, "bytes");
	mon.tsc_hz = sq_nf_region(nf)->tsc_hz;
	if (interval_ms != 0 && mon.tsc_hz == 0)
		fprintf(stderr, NF_NAME ": the region gives no TSC rate; no rate lines\n");
	else
		mon.interval_tsc = interval_ms * mon.tsc_hz / 1000;
	mon.last_tsc = rte_rdtsc();

	sq_nf_set_burst_handler(nf, monitor_burst, &mon);
	if (mon.interval_tsc != 0)
		sq_nf_set_state_cleaner(nf, monitor_stop, &mon);
	return sq_nf_run(nf) < 0 ? NF_EXIT_FAIL : NF_EXIT_OK;
}
