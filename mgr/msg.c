/* SPDX-License-Identifier: BSD-3-Clause
 * Messages (seed 003 §IV.B; docs/nf-api.md "Messages"): each NF's control
 * block holds two rings of SQ_MSG_SLOTS one-line messages, msg_in (manager
 * to NF: block, rerun, stop, and user messages) and msg_out (NF to
 * manager: acknowledgements and user messages). No ring is shared by two
 * NFs, so a message reaches the instance it was sent to and no other.
 *
 * The NF writes its counts in the region, where any NF could rewrite them:
 * the manager keeps its own (in_head, out_tail), reads the NF's only to
 * learn how far it got, and treats a count that makes no sense as a lie
 * (counted; the ring is taken back to the manager's count). Messages are
 * copied out of the region before they are looked at.
 *
 * An NF that posts sets its bit in the msg-ready bitmap; the main lcore
 * reads the bitmap's words every control period, so 10,000 quiet NFs cost
 * it a few hundred word reads, not 10,000 control blocks.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_common.h>
#include <rte_cycles.h>
#include <rte_lcore.h>
#include <rte_telemetry.h>

#include "config.h"
#include "mgr.h"
#include "msg.h"
#include "tel_reply.h"

#define LOG_MAX   256 /* messages kept for /squall/msgs */
#define LOG_SHOWN 64  /* ... shown at once */
#define NFS_SHOWN 64  /* NFs with message counters shown */

/* The manager's side of one NF's rings. */
struct nf_msgs {
	uint32_t in_head;  /* messages posted to it */
	uint32_t out_tail; /* messages taken from it */
	uint32_t acked;    /* its last SQ_MSG_BLOCKED or SQ_MSG_RUNNING */
	bool wake_due;     /* posted by another thread: the main lcore wakes it */
	uint64_t sent, received, full, bad, undelivered;
};

struct msg_entry {
	uint64_t seq, us;
	uint32_t nf;
	uint16_t instance;
	bool to_nf;
	char service[SQ_CFG_NAME_LEN];
	struct sq_msg m;
};

struct msgs {
	struct mgr *mgr;
	/* Senders (any thread), the main lcore's takes and the log: messages
	 * are rare, so one lock. */
	pthread_mutex_t lock;
	struct nf_msgs *nf; /* by NF id, max_nfs of them */
	uint32_t max_nfs;
	uint32_t n_wake_due;
	uint64_t start_tsc, hz;
	uint64_t sent, received, full, bad, undelivered;
	struct msg_entry log[LOG_MAX];
	uint64_t n_log;
};

static struct msgs *the_msgs; /* for the telemetry callbacks */

int
mgr_msg_init(struct mgr *mgr)
{
	struct msgs *ms = calloc(1, sizeof(*ms));

	if (ms == NULL)
		return -ENOMEM;
	ms->max_nfs = mgr->region->max_nfs;
	ms->nf = calloc(ms->max_nfs, sizeof(*ms->nf));
	if (ms->nf == NULL) {
		free(ms);
		return -ENOMEM;
	}
	pthread_mutex_init(&ms->lock, NULL);
	ms->mgr = mgr;
	ms->start_tsc = rte_rdtsc();
	ms->hz = rte_get_tsc_hz();
	mgr->msgs = ms;
	the_msgs = ms;
	return 0;
}

void
mgr_msg_free(struct mgr *mgr)
{
	struct msgs *ms = mgr->msgs;

	if (ms == NULL)
		return;
	the_msgs = NULL;
	mgr->msgs = NULL;
	pthread_mutex_destroy(&ms->lock);
	free(ms->nf);
	free(ms);
}

/* Under the lock. */
static void
log_msg(struct msgs *ms, const struct mgr_nf *nf, bool to_nf, const struct sq_msg *m)
{
	struct msg_entry *e = &ms->log[ms->n_log % LOG_MAX];

	e->seq = ms->n_log++;
	e->us = (rte_rdtsc() - ms->start_tsc) * 1000000 / ms->hz;
	e->nf = nf->id;
	e->instance = nf->instance;
	e->to_nf = to_nf;
	snprintf(e->service, sizeof(e->service), "%s", ms->mgr->cfg->services[nf->service].name);
	e->m = *m;
}

void
mgr_msg_nf_starting(struct mgr *mgr, struct mgr_nf *nf)
{
	struct msgs *ms = mgr->msgs;
	struct nf_msgs *n;
	uint32_t taken;

	if (ms == NULL || nf->id >= ms->max_nfs)
		return;
	n = &ms->nf[nf->id];
	pthread_mutex_lock(&ms->lock);
	/* what the last process took, as far as a sane count tells */
	taken = atomic_load_explicit(&nf->ctl->msg_in_tail, memory_order_relaxed);
	if (n->in_head - taken <= SQ_MSG_SLOTS) {
		n->undelivered += n->in_head - taken;
		ms->undelivered += n->in_head - taken;
	}
	atomic_store_explicit(&nf->ctl->msg_in_head, n->in_head, memory_order_relaxed);
	atomic_store_explicit(&nf->ctl->msg_in_tail, n->in_head, memory_order_relaxed);
	atomic_store_explicit(&nf->ctl->msg_out_tail, n->out_tail, memory_order_relaxed);
	atomic_store_explicit(&nf->ctl->msg_out_head, n->out_tail, memory_order_relaxed);
	n->acked = 0;
	pthread_mutex_unlock(&ms->lock);
}

static bool
on_main_lcore(void)
{
	return rte_lcore_id() == rte_get_main_lcore();
}

int
mgr_msg_send(struct mgr *mgr, struct mgr_nf *nf, uint32_t type, const void *data, uint32_t len)
{
	struct msgs *ms = mgr->msgs;
	struct nf_msgs *n;
	struct sq_msg m = {.type = type, .len = len};
	uint32_t used;
	int ret = 0;

	if (ms == NULL || nf->id >= ms->max_nfs || len > SQ_MSG_DATA_LEN)
		return -EINVAL;
	if (nf->pid <= 0)
		return -ESRCH;
	if (len > 0)
		memcpy(m.data, data, len);
	n = &ms->nf[nf->id];
	pthread_mutex_lock(&ms->lock);
	used = n->in_head - atomic_load_explicit(&nf->ctl->msg_in_tail, memory_order_acquire);
	if (used > SQ_MSG_SLOTS) {
		/* ahead of what we posted, or behind by more than a ring */
		n->bad++;
		ms->bad++;
		ret = -EPROTO;
	} else if (used == SQ_MSG_SLOTS) {
		n->full++;
		ms->full++;
		ret = -ENOBUFS;
	} else {
		nf->ctl->msg_in[n->in_head % SQ_MSG_SLOTS] = m;
		n->in_head++;
		atomic_store_explicit(&nf->ctl->msg_in_head, n->in_head, memory_order_release);
		n->sent++;
		ms->sent++;
		log_msg(ms, nf, true, &m);
		if (!on_main_lcore() && !n->wake_due) {
			n->wake_due = true;
			ms->n_wake_due++;
		}
	}
	pthread_mutex_unlock(&ms->lock);
	/* the wake path's full fence orders our head store before its read of
	 * the NF's state, as the NF publishes ASLEEP before it reads the head */
	if (ret == 0 && on_main_lcore())
		mgr_wakeup_force(mgr, nf);
	return ret;
}

static bool
valid_from_nf(const struct sq_msg *m)
{
	return m->len <= SQ_MSG_DATA_LEN &&
	       (m->type == SQ_MSG_BLOCKED || m->type == SQ_MSG_RUNNING || m->type >= SQ_MSG_USER);
}

/* Take what NF @p id posted. Under the lock. */
static void
take_from(struct msgs *ms, uint32_t id)
{
	struct mgr_nf *nf = &ms->mgr->nfs[id];
	struct nf_msgs *n = &ms->nf[id];
	uint32_t head = atomic_load_explicit(&nf->ctl->msg_out_head, memory_order_acquire);
	uint32_t avail = head - n->out_tail;

	if (avail == 0)
		return;
	if (avail > SQ_MSG_SLOTS) {
		n->bad++;
		ms->bad++;
		n->out_tail = head; /* nothing in it can be trusted to be a message */
	}
	for (; n->out_tail != head; n->out_tail++) {
		struct sq_msg m = nf->ctl->msg_out[n->out_tail % SQ_MSG_SLOTS];

		if (!valid_from_nf(&m)) {
			n->bad++;
			ms->bad++;
			continue;
		}
		n->received++;
		ms->received++;
		if (m.type == SQ_MSG_BLOCKED || m.type == SQ_MSG_RUNNING)
			n->acked = m.type;
		log_msg(ms, nf, false, &m);
	}
	atomic_store_explicit(&nf->ctl->msg_out_tail, n->out_tail, memory_order_release);
}

static void
wake_due(struct mgr *mgr, struct msgs *ms)
{
	uint32_t n_nfs = RTE_MIN(__atomic_load_n(&mgr->n_nfs, __ATOMIC_ACQUIRE), ms->max_nfs);

	ms->n_wake_due = 0;
	for (uint32_t id = 0; id < n_nfs; id++) {
		if (!ms->nf[id].wake_due)
			continue;
		ms->nf[id].wake_due = false;
		mgr_wakeup_force(mgr, &mgr->nfs[id]);
	}
}

void
mgr_msg_poll(struct mgr *mgr)
{
	struct msgs *ms = mgr->msgs;
	uint32_t n_nfs;
	size_t words;

	if (ms == NULL)
		return;
	n_nfs = RTE_MIN(__atomic_load_n(&mgr->n_nfs, __ATOMIC_ACQUIRE), ms->max_nfs);
	words = sq_tx_ready_words(n_nfs);
	for (size_t w = 0; w < words; w++) {
		uint64_t bits = atomic_load_explicit(&mgr->msg_ready[w], memory_order_relaxed);

		if (bits == 0)
			continue;
		/* cleared before the rings are read: a message posted after our
		 * read of its NF's head sets the bit again */
		atomic_fetch_and_explicit(&mgr->msg_ready[w], ~bits, memory_order_seq_cst);
		pthread_mutex_lock(&ms->lock);
		for (; bits != 0; bits &= bits - 1) {
			uint32_t id = (uint32_t)(w * 64) + (uint32_t)__builtin_ctzll(bits);

			if (id < n_nfs) /* any NF can set any bit: the rest mean nothing */
				take_from(ms, id);
		}
		pthread_mutex_unlock(&ms->lock);
	}
	if (ms->n_wake_due > 0) {
		pthread_mutex_lock(&ms->lock);
		wake_due(mgr, ms);
		pthread_mutex_unlock(&ms->lock);
	}
}

uint32_t
mgr_msg_acked(const struct mgr *mgr, uint32_t nf_id)
{
	const struct msgs *ms = mgr->msgs;

	return ms != NULL && nf_id < ms->max_nfs ? ms->nf[nf_id].acked : 0;
}

static const char *
type_name(uint32_t type)
{
	switch (type) {
	case SQ_MSG_BLOCK: return "block";
	case SQ_MSG_RERUN: return "rerun";
	case SQ_MSG_STOP: return "stop";
	case SQ_MSG_BLOCKED: return "blocked";
	case SQ_MSG_RUNNING: return "running";
	default: return type >= SQ_MSG_USER ? "user" : "?";
	}
}

static void
add_entry(struct rte_tel_data *d, const struct msg_entry *e)
{
	struct rte_tel_data *c = rte_tel_data_alloc();
	char key[32], hex[2 * SQ_MSG_DATA_LEN + 1];
	uint32_t len = RTE_MIN(e->m.len, (uint32_t)SQ_MSG_DATA_LEN);

	if (c == NULL)
		return;
	for (uint32_t i = 0; i < len; i++)
		snprintf(hex + 2 * i, 3, "%02x", e->m.data[i]);
	hex[2 * len] = '\0';
	rte_tel_data_start_dict(c);
	rte_tel_data_add_dict_u64(c, "seq", e->seq);
	rte_tel_data_add_dict_u64(c, "us", e->us);
	rte_tel_data_add_dict_string(c, "dir", e->to_nf ? "to_nf" : "from_nf");
	rte_tel_data_add_dict_u64(c, "nf", e->nf);
	rte_tel_data_add_dict_string(c, "service", e->service);
	rte_tel_data_add_dict_u64(c, "instance", e->instance);
	rte_tel_data_add_dict_u64(c, "type", e->m.type);
	rte_tel_data_add_dict_string(c, "kind", type_name(e->m.type));
	rte_tel_data_add_dict_u64(c, "len", len);
	rte_tel_data_add_dict_string(c, "data", hex);
	snprintf(key, sizeof(key), "m%08" PRIu64, e->seq);
	if (rte_tel_data_add_dict_container(d, key, c, 0) < 0)
		rte_tel_data_free(c);
}

static void
add_nf_counts(struct rte_tel_data *d, const struct msgs *ms, uint32_t id)
{
	const struct nf_msgs *n = &ms->nf[id];
	struct rte_tel_data *c = rte_tel_data_alloc();
	char key[16];

	if (c == NULL)
		return;
	rte_tel_data_start_dict(c);
	rte_tel_data_add_dict_u64(c, "sent", n->sent);
	rte_tel_data_add_dict_u64(c, "received", n->received);
	rte_tel_data_add_dict_u64(c, "full", n->full);
	rte_tel_data_add_dict_u64(c, "bad", n->bad);
	rte_tel_data_add_dict_u64(c, "undelivered", n->undelivered);
	rte_tel_data_add_dict_string(c, "acked", n->acked ? type_name(n->acked) : "");
	snprintf(key, sizeof(key), "nf%u", id);
	if (rte_tel_data_add_dict_container(d, key, c, 0) < 0)
		rte_tel_data_free(c);
}

/* /squall/msgs[,SEQ]: totals, the NFs with messages (the first NFS_SHOWN),
 * and the messages after SEQ (default: the last LOG_SHOWN), oldest first. */
int
mgr_msg_tel_list(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct msgs *ms = the_msgs;
	struct msg_entry copy[LOG_SHOWN];
	uint64_t since = 0, first, n;
	uint32_t n_nfs, shown = 0;
	size_t k = 0;
	char *end;

	(void)cmd;
	if (ms == NULL)
		return mgr_tel_error(d, "messages are not set up");
	if (params != NULL && params[0] != '\0') {
		since = strtoull(params, &end, 10) + 1;
		if (*end != '\0')
			return mgr_tel_error(d, "usage: /squall/msgs[,SEQ] (messages after SEQ)");
	}
	rte_tel_data_start_dict(d);
	pthread_mutex_lock(&ms->lock);
	n = ms->n_log;
	first = RTE_MAX(since, n > LOG_SHOWN ? n - LOG_SHOWN : 0);
	for (uint64_t q = first; q < n; q++)
		copy[k++] = ms->log[q % LOG_MAX];
	rte_tel_data_add_dict_u64(d, "sent", ms->sent);
	rte_tel_data_add_dict_u64(d, "received", ms->received);
	rte_tel_data_add_dict_u64(d, "full", ms->full);
	rte_tel_data_add_dict_u64(d, "bad", ms->bad);
	rte_tel_data_add_dict_u64(d, "undelivered", ms->undelivered);
	rte_tel_data_add_dict_u64(d, "messages", n);
	n_nfs = RTE_MIN(ms->mgr->n_nfs, ms->max_nfs);
	for (uint32_t id = 0; id < n_nfs && shown < NFS_SHOWN; id++) {
		const struct nf_msgs *c = &ms->nf[id];

		if (c->sent + c->received + c->full + c->bad + c->undelivered == 0)
			continue;
		add_nf_counts(d, ms, id);
		shown++;
	}
	pthread_mutex_unlock(&ms->lock);
	for (size_t i = 0; i < k; i++)
		add_entry(d, &copy[i]);
	return 0;
}

static int
nibble(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)(c | 0x20);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* HEX (an even number of hex digits, at most SQ_MSG_DATA_LEN bytes) into
 * @p out. @return bytes, or -1. */
static int
parse_hex(const char *hex, uint8_t *out)
{
	size_t len = strlen(hex);

	if (len % 2 != 0 || len / 2 > SQ_MSG_DATA_LEN)
		return -1;
	for (size_t i = 0; i < len / 2; i++) {
		int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return (int)(len / 2);
}

#define SEND_USAGE                                                                         \
	"usage: /squall/msg_send,SERVICE,INSTANCE,TYPE[,HEX] (TYPE >= 256, HEX: up to 56 " \
	"bytes)"

/* /squall/msg_send,SERVICE,INSTANCE,TYPE[,HEX]: a user message to one
 * instance. Block, rerun and stop are the scaler's and the supervisor's. */
int
mgr_msg_tel_send(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct msgs *ms = the_msgs;
	char buf[256], *save = NULL, *svc, *inst, *type, *hex, *end;
	uint8_t data[SQ_MSG_DATA_LEN];
	unsigned long instance, t;
	struct mgr *mgr;
	int s, len = 0, ret;

	(void)cmd;
	if (ms == NULL)
		return mgr_tel_error(d, "messages are not set up");
	if (params == NULL || strlen(params) >= sizeof(buf))
		return mgr_tel_error(d, SEND_USAGE);
	mgr = ms->mgr;
	snprintf(buf, sizeof(buf), "%s", params);
	svc = strtok_r(buf, ",", &save);
	inst = strtok_r(NULL, ",", &save);
	type = strtok_r(NULL, ",", &save);
	hex = strtok_r(NULL, ",", &save);
	if (svc == NULL || inst == NULL || type == NULL || strtok_r(NULL, ",", &save) != NULL)
		return mgr_tel_error(d, SEND_USAGE);
	s = sq_config_service_index(mgr->cfg, svc);
	if (s < 0)
		return mgr_tel_error(d, "no such service");
	instance = strtoul(inst, &end, 10);
	if (*inst == '\0' || *end != '\0' || instance >= mgr->services[s].n_nfs)
		return mgr_tel_error(d, "no such instance of the service");
	t = strtoul(type, &end, 0);
	if (*type == '\0' || *end != '\0' || t < SQ_MSG_USER || t > UINT32_MAX)
		return mgr_tel_error(d, "TYPE must be a user type, 256..4294967295");
	if (hex != NULL && (len = parse_hex(hex, data)) < 0)
		return mgr_tel_error(d, "HEX must be pairs of hex digits, up to 56 bytes");
	ret = mgr_msg_send(mgr, &mgr->nfs[mgr->services[s].first_nf + instance], (uint32_t)t, data,
			   (uint32_t)len);
	if (ret == -ESRCH)
		return mgr_tel_error(d, "the instance has no process now");
	if (ret == -ENOBUFS)
		return mgr_tel_error(d, "its message ring is full (the NF does not take them)");
	if (ret < 0)
		return mgr_tel_error(d, "its message ring is corrupt (counted under bad)");
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_string(d, "service", mgr->cfg->services[s].name);
	rte_tel_data_add_dict_u64(d, "instance", instance);
	rte_tel_data_add_dict_u64(d, "nf", mgr->services[s].first_nf + instance);
	rte_tel_data_add_dict_u64(d, "type", t);
	rte_tel_data_add_dict_u64(d, "len", (uint64_t)len);
	return 0;
}
