/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-msgecho, for tests only: passes packets on (NEXT) and answers
 * messages, so the manager's message rings can be tested.
 *
 *   squall-nf-msgecho [--lie out_head|in_tail] [--hello N]
 *
 * Each user message (type T, data D) is counted (counter user_msgs) and
 * answered with type T + 1 and data "i<instance>:" followed by D, so a test
 * can tell which instance took it. BLOCK and RERUN are counted (blocks,
 * reruns) after libsquall acted on them; sq_nf_blocked() is checked then.
 *
 * --hello N       send N user messages (type 300) at start, before the
 *                 manager can take any: a ring holds SQ_MSG_SLOTS, the rest
 *                 are refused (counter send_refused)
 * --lie out_head  at start, claim 1,000 messages posted (and set our bit):
 *                 the manager must count it under bad and take none
 * --lie in_tail   at start, claim to have taken 1,000,000 messages: the
 *                 manager must refuse to send to us (bad), and no other NF
 *                 may notice
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include <squall/region.h>
#include <squall/squall.h>

#include "../../nfs/nf_opt.h"

#define NF_NAME    "squall-nf-msgecho"
#define HELLO_TYPE 300

struct echo {
	int c_user, c_blocks, c_reruns, c_refused, c_wrong;
	unsigned int instance;
};

static sq_verdict_t
pass(struct rte_mbuf *pkt, void *arg)
{
	(void)pkt;
	(void)arg;
	return SQ_NEXT;
}

static void
answer(struct sq_nf *nf, const struct sq_msg *m, struct echo *e)
{
	uint8_t data[SQ_MSG_DATA_LEN];
	int n = snprintf((char *)data, sizeof(data), "i%u:", e->instance);
	uint32_t len = RTE_MIN(m->len, (uint32_t)(SQ_MSG_DATA_LEN - n));

	memcpy(data + n, m->data, len);
	if (sq_nf_msg_send(nf, m->type + 1, data, (uint32_t)n + len) < 0)
		sq_nf_counter_add(nf, e->c_refused, 1);
}

static void
on_msg(struct sq_nf *nf, const struct sq_msg *m, void *arg)
{
	struct echo *e = arg;

	switch (m->type) {
	case SQ_MSG_BLOCK:
		sq_nf_counter_add(nf, e->c_blocks, 1);
		sq_nf_counter_add(nf, e->c_wrong, !sq_nf_blocked(nf));
		break;
	case SQ_MSG_RERUN:
		sq_nf_counter_add(nf, e->c_reruns, 1);
		sq_nf_counter_add(nf, e->c_wrong, sq_nf_blocked(nf));
		break;
	default:
		if (m->type >= SQ_MSG_USER) {
			sq_nf_counter_add(nf, e->c_user, 1);
			answer(nf, m, e);
		}
		break;
	}
}

static void
lie(struct sq_nf *nf, const char *what)
{
	struct sq_nf_ctl *ctl = sq_nf_ctl(nf);
	uint32_t id = ctl->id;

	if (strcmp(what, "out_head") == 0) {
		atomic_store(&ctl->msg_out_head, atomic_load(&ctl->msg_out_tail) + 1000);
		atomic_fetch_or(&sq_region_msg_ready(sq_nf_region(nf))[id / 64], 1ull << (id % 64));
	} else {
		atomic_store(&ctl->msg_in_tail, 1000000);
	}
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"lie", required_argument, NULL, 'l'},
		{"hello", required_argument, NULL, 'e'},
		NF_OPT_COMMON_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	static struct echo e;
	const char *what = NULL;
	uint64_t hello = 0;
	struct sq_nf *nf;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, NF_OPT_SHORT, longopts, NULL)) != -1) {
		switch (opt) {
		case 'l':
			what = optarg;
			if (strcmp(what, "out_head") != 0 && strcmp(what, "in_tail") != 0)
				return nf_opt_usage_error(NF_NAME);
			break;
		case 'e':
			if (nf_opt_u64(NF_NAME, "hello", optarg, 0, 100, &hello) < 0)
				return NF_EXIT_USAGE;
			break;
		case 'h':
			printf("Usage: " NF_NAME " [--lie out_head|in_tail] [--hello N]\n");
			return 0;
		case 0: break;
		default: return nf_opt_usage_error(NF_NAME);
		}
	}
	ret = nf_opt_check_done(NF_NAME, argc, argv);
	if (ret != 0)
		return ret;
	ret = nf_opt_attach(argc, argv, &nf);
	if (ret != 0)
		return ret;
	e.instance = sq_nf_ctl(nf)->instance;
	e.c_user = sq_nf_counter_register(nf, "user_msgs");
	e.c_blocks = sq_nf_counter_register(nf, "blocks");
	e.c_reruns = sq_nf_counter_register(nf, "reruns");
	e.c_refused = sq_nf_counter_register(nf, "send_refused");
	e.c_wrong = sq_nf_counter_register(nf, "blocked_wrong");
	for (uint64_t i = 0; i < hello; i++) {
		char data[16];
		int n = snprintf(data, sizeof(data), "hello%" PRIu64, i);

		if (sq_nf_msg_send(nf, HELLO_TYPE, data, (uint32_t)n) < 0)
			sq_nf_counter_add(nf, e.c_refused, 1);
	}
	if (what != NULL)
		lie(nf, what);
	/* libsquall's refusal of a prefetch bit it does not know, checked
	 * here as every message test starts this NF */
	if (sq_nf_set_prefetch(nf, SQ_PREFETCH_DATA << 1) != -EINVAL ||
	    sq_nf_set_prefetch(nf, SQ_PREFETCH_MBUF) != 0) {
		fprintf(stderr, NF_NAME ": sq_nf_set_prefetch() took an unknown bit\n");
		return NF_EXIT_FAIL;
	}
	sq_nf_set_pkt_handler(nf, pass, NULL);
	sq_nf_set_msg_handler(nf, on_msg, &e);
	return sq_nf_run(nf) < 0 ? NF_EXIT_FAIL : NF_EXIT_OK;
}
