/* SPDX-License-Identifier: BSD-3-Clause
 * Wakeup role (DESIGN §5, seed 000 §4-5.1): when a sleeping NF is woken.
 *
 * The check runs inline at the end of the round that enqueued (no core spins
 * for wakeups): an NF is woken when its queue reaches its threshold, when a
 * FIN or RST waits, or, from a periodic scan of only the NFs that wait,
 * when its oldest packet has waited longer than its timeout. Policies:
 *   min       threshold 1
 *   fixed     threshold thresh_pkts, timeout timeout_us
 *   adaptive  threshold 1 until the NF has seen t_lat_pkts packets (short
 *             flows want latency); then AIMD: +1 after a wake by threshold,
 *             halved after a wake by timeout, within [min_pkts, max_pkts].
 * Exactly one FUTEX_WAKE per sleep: ASLEEP -> WAKING by compare-and-swap.
 *
 * A core runs only so many NFs a second (each run is a context switch, ~3-5
 * us here). Adaptive timeouts are therefore stretched per core group (the
 * NFs pinned to one core) when its adaptive NFs are woken more than
 * core_wakes_per_s: with 1,000 NFs on a core, a 100 us timeout would ask for
 * 10 million wakes a second, and the core would do nothing but switch.
 * mgr_wakeup_tune doubles the floor of those timeouts while the group is over
 * budget and halves it while under half of it. It grows only while some
 * wakes are by timeout: the floor is the lever on those, and on threshold
 * wakes only through them (fewer timeouts, so the adaptive threshold grows).
 * NFs that reach their maximum threshold without any timeout are busy enough
 * that the floor would only delay the quiet ones.
 */
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_debug.h>

#include "mgr.h"

#define TUNE_WINDOW_US 5000
#define FLOOR_MIN_US   25     /* the first step of the floor; below it, none */
#define FLOOR_MAX_US   100000 /* stretched no further */

enum wake_reason { WAKE_THRESH, WAKE_TIMEOUT, WAKE_URGENT };

static const char *const policy_names[] = {
	[SQ_WAKE_MIN] = "min",
	[SQ_WAKE_FIXED] = "fixed",
	[SQ_WAKE_ADAPTIVE] = "adaptive",
};

const char *
mgr_wake_policy_name(uint32_t policy)
{
	return policy < RTE_DIM(policy_names) ? policy_names[policy] : "?";
}

void
mgr_wakeup_init_nf(struct mgr_nf *nf, const struct sq_cfg_wake *cfg)
{
	struct nf_wake *w = &nf->wake;

	w->policy = cfg->policy;
	w->thresh_pkts = cfg->policy == SQ_WAKE_MIN ? 1 : cfg->thresh_pkts;
	/* In two steps: timeout_ns * hz overflows 64 bits beyond ~6 s. */
	w->timeout_tsc = cfg->timeout_ns / 1000 * (rte_get_tsc_hz() / 1000) / 1000;
	w->min_pkts = cfg->min_pkts;
	w->max_pkts = cfg->max_pkts;
	w->t_lat_pkts = cfg->t_lat_pkts;
	if (cfg->policy == SQ_WAKE_ADAPTIVE)
		w->thresh_pkts = RTE_MAX(cfg->min_pkts, RTE_MIN(cfg->thresh_pkts, cfg->max_pkts));
}

int
mgr_wakeup_set_policy(struct mgr *mgr, uint16_t service, const struct sq_cfg_wake *cfg)
{
	const struct mgr_service *svc;

	if (service >= mgr->cfg->n_services)
		return -EINVAL;
	svc = &mgr->services[service];
	for (uint32_t i = 0; i < svc->n_nfs; i++)
		mgr_wakeup_init_nf(&mgr->nfs[svc->first_nf + i], cfg);
	mgr->cfg->services[service].wake = *cfg;
	return 0;
}

static void
futex_wake_one(_Atomic uint32_t *word)
{
	/* Not FUTEX_PRIVATE: the word lives in the shared region. */
	syscall(SYS_futex, word, FUTEX_WAKE, 1, NULL, NULL, 0);
}

static uint64_t
nf_enqueued(const struct mgr *mgr, const struct mgr_nf *nf)
{
	return atomic_load_explicit(&mgr->rx.stages[nf->id].enq_pkts, memory_order_relaxed) +
	       atomic_load_explicit(&mgr->tx.stages[nf->id].enq_pkts, memory_order_relaxed);
}

/* The threshold now: adaptive NFs wake at 1 packet while their flow is short. */
static uint32_t
thresh_now(const struct mgr *mgr, const struct mgr_nf *nf)
{
	const struct nf_wake *w = &nf->wake;

	if (w->policy == SQ_WAKE_ADAPTIVE && nf_enqueued(mgr, nf) < w->t_lat_pkts)
		return 1;
	return w->thresh_pkts;
}

/* The timeout now: adaptive ones stretched to their core group's floor. */
static uint64_t
timeout_now(const struct mgr *mgr, const struct mgr_nf *nf)
{
	const struct nf_wake *w = &nf->wake;

	if (w->policy != SQ_WAKE_ADAPTIVE)
		return w->timeout_tsc;
	return RTE_MAX(w->timeout_tsc,
		       atomic_load_explicit(&mgr->core_wakes[nf->core_group].floor_tsc,
					    memory_order_relaxed));
}

static void
adapt(struct nf_wake *w, enum wake_reason why)
{
	if (w->policy != SQ_WAKE_ADAPTIVE)
		return;
	if (why == WAKE_THRESH && w->thresh_pkts < w->max_pkts)
		w->thresh_pkts++;
	else if (why == WAKE_TIMEOUT)
		w->thresh_pkts = RTE_MAX(w->min_pkts, w->thresh_pkts / 2);
}

/* ASLEEP -> WAKING, so one wake goes out per sleep however many roles or
 * rounds find the NF asleep (seed 000 §4's flag). @return true if we woke it. */
static bool
wake(struct mgr *mgr, struct mgr_nf *nf, enum wake_reason why)
{
	uint32_t expected = SQ_NF_ASLEEP;

	if (!atomic_compare_exchange_strong(&nf->ctl->state, &expected, SQ_NF_WAKING))
		return false;
	nf->ctl->wakes++;
	if (why == WAKE_THRESH)
		nf->wake.by_thresh++;
	else if (why == WAKE_TIMEOUT)
		nf->wake.by_timeout++;
	else
		nf->wake.by_urgent++;
	adapt(&nf->wake, why);
	if (nf->wake.policy == SQ_WAKE_ADAPTIVE && why != WAKE_URGENT) {
		struct core_wakes *cw = &mgr->core_wakes[nf->core_group];

		atomic_fetch_add_explicit(&cw->wakes, 1, memory_order_relaxed);
		if (why == WAKE_TIMEOUT)
			atomic_fetch_add_explicit(&cw->timeout_wakes, 1, memory_order_relaxed);
	}
	/* (the manager's own record first: the shared count, which the NF
	 * lowers when it runs, never exceeds it) */
	if (mgr->woken_q != NULL)
		rte_ring_mp_enqueue(mgr->woken_q, (void *)(uintptr_t)nf->id);
	/* (in the region the NF maps: it takes itself off when it runs) */
	atomic_fetch_add_explicit(&nf->hdr->woken[nf->core_group].n, 1, memory_order_relaxed);
	futex_wake_one(&nf->ctl->state);
	return true;
}

static bool
is_asleep(const struct mgr_nf *nf)
{
	return atomic_load_explicit(&nf->ctl->state, memory_order_relaxed) == SQ_NF_ASLEEP;
}

/* An entry is live while its NF still waits that wait: at most one per NF.
 * The rest are stale (the NF was woken, or slept again and waits anew). */
static bool
entry_live(const struct role_ctx *role, const struct pending_entry *e)
{
	const struct nf_stage *stage = &role->stages[e->nf_id];

	return stage->pending && stage->pending_since == e->since;
}

/* Each service's queue holds twice its NFs, allocated before the packets
 * flow: the packet path never allocates. */
int
mgr_wakeup_queues_init(struct mgr *mgr, struct role_ctx *role)
{
	for (uint16_t s = 0; s < role->n_queues; s++) {
		struct pending_queue *q = &role->pending[s];

		q->cap = rte_align32pow2(RTE_MAX(2 * mgr->services[s].n_nfs, 2u));
		q->e = calloc(q->cap, sizeof(*q->e));
		if (q->e == NULL)
			return -ENOMEM;
	}
	return 0;
}

/* Full: drop the stale entries, in place, keeping the order (deadline
 * order). With at most one live entry per NF and twice as many slots as
 * NFs, at least half the queue comes free, so this runs at most once per
 * NF-count pushes. */
static void
queue_compact(struct role_ctx *role, struct pending_queue *q)
{
	uint32_t out = q->head;

	for (uint32_t i = q->head; i != q->tail; i++) {
		const struct pending_entry *e = &q->e[i & (q->cap - 1)];

		if (entry_live(role, e))
			q->e[out++ & (q->cap - 1)] = *e;
	}
	role->n_pending -= q->tail - out;
	q->tail = out;
}

/* @return false if there is no room, which the bound above rules out. */
static bool
queue_push(struct role_ctx *role, struct pending_queue *q, uint32_t id, uint64_t since)
{
	if (q->tail - q->head == q->cap)
		queue_compact(role, q);
	if (unlikely(q->tail - q->head == q->cap))
		return false;
	q->e[q->tail++ & (q->cap - 1)] = (struct pending_entry){id, since};
	role->n_pending++;
	return true;
}

/* From now on the NF waits for a wake by timeout (unless the threshold comes
 * first): queue it once per wait, timed from its first waiting packet.
 * @return false if it could not be queued: wake it some other way. */
static bool
start_waiting(struct mgr *mgr, struct role_ctx *role, uint32_t id)
{
	struct nf_stage *stage = &role->stages[id];
	struct mgr_nf *nf = &mgr->nfs[id];

	/* Still the same wait? A wake and a new sleep since start a new one. */
	if (stage->pending && stage->pending_sleeps == nf->ctl->sleeps)
		return true;
	stage->pending = true;
	stage->pending_since = rte_rdtsc();
	stage->pending_sleeps = nf->ctl->sleeps;
	if (unlikely(!queue_push(role, &role->pending[nf->service], id, stage->pending_since))) {
		stage->pending = false;
		return false;
	}
	return true;
}

/* Keep this round's packets for a sleeping NF in the stage while they and
 * its queue stay below its threshold: nothing crosses to the NF's core until
 * it is worth a wake. @return true if they stay. */
bool
mgr_wakeup_hold(struct mgr *mgr, struct role_ctx *role, uint32_t id)
{
	struct nf_stage *stage = &role->stages[id];
	struct mgr_nf *nf = &mgr->nfs[id];
	uint32_t thresh;

	if (stage->urgent || stage->n >= SQ_STAGE_MAX || mgr->stop || !is_asleep(nf))
		return false;
	thresh = thresh_now(mgr, nf);
	if (stage->n >= thresh || stage->n + rte_ring_count(nf->rx) >= thresh)
		return false;
	if (unlikely(!start_waiting(mgr, role, id)))
		return false; /* no timeout to wake it by: send them now */
	stage->held_pkts += stage->n - stage->n_counted;
	stage->n_counted = stage->n;
	return true;
}

/* After this round's enqueues: wake whom they brought to the threshold. */
void
mgr_wakeup_check(struct mgr *mgr, struct role_ctx *role)
{
	/* The enqueues before this are release stores; the NF stores ASLEEP and
	 * then reads the ring. Without a full fence here our read of the state
	 * could pass our enqueue (store-load reordering) and both sides would
	 * miss each other: a lost wake-up. One fence covers the whole round. */
	atomic_thread_fence(memory_order_seq_cst);
	for (uint32_t i = 0; i < role->n_touched; i++) {
		uint32_t id = role->touched[i];
		struct nf_stage *stage = &role->stages[id];
		struct mgr_nf *nf = &mgr->nfs[id];
		bool urgent = stage->urgent;

		stage->urgent = false;
		if (!is_asleep(nf))
			continue;
		if (urgent || rte_ring_count(nf->rx) >= thresh_now(mgr, nf)) {
			wake(mgr, nf, urgent ? WAKE_URGENT : WAKE_THRESH);
			stage->pending = false; /* its queue entry is stale now */
			continue;
		}
		/* Below threshold: timed from now (or, with no room to time it,
		 * woken now). */
		if (unlikely(!start_waiting(mgr, role, id)))
			wake(mgr, nf, WAKE_TIMEOUT);
	}
}

/* One queue entry at its deadline. @return true if the NF still waits
 * (its clock restarted: queued again). */
static bool
expire(struct mgr *mgr, struct role_ctx *role, const struct pending_entry *e)
{
	struct nf_stage *stage = &role->stages[e->nf_id];
	struct mgr_nf *nf = &mgr->nfs[e->nf_id];

	if (!entry_live(role, e))
		return false; /* stale: this wait ended, another may have begun */
	stage->pending = false;
	if (stage->n > 0) {
		if (!atomic_load_explicit(&nf->live, memory_order_relaxed)) {
			role->drop_held(mgr, role, e->nf_id, SQ_DROP_NF_DIED);
			return false;
		}
		role->flush_nf(mgr, role, e->nf_id);
		atomic_thread_fence(memory_order_seq_cst); /* as in mgr_wakeup_check */
	}
	if (!is_asleep(nf) || rte_ring_count(nf->rx) == 0)
		return false; /* awake: it takes what we just gave it */
	if (nf->ctl->sleeps != stage->pending_sleeps) {
		/* It woke and slept again since: this wait started later. */
		if (start_waiting(mgr, role, e->nf_id))
			return true;
	}
	wake(mgr, nf, WAKE_TIMEOUT);
	return false;
}

/* The timeout scan: only entries at their deadline are looked at, so it
 * costs nothing per waiting NF per round, with 10 or 10,000 of them. */
unsigned int
mgr_wakeup_poll(struct mgr *mgr, struct role_ctx *role)
{
	unsigned int expired = 0;
	uint64_t now;

	if (role->n_pending == 0)
		return 0;
	now = rte_rdtsc();
	for (uint16_t s = 0; s < role->n_queues; s++) {
		struct pending_queue *q = &role->pending[s];

		while (q->head != q->tail) {
			struct pending_entry e = q->e[q->head & (q->cap - 1)];

			if (e.since + timeout_now(mgr, &mgr->nfs[e.nf_id]) > now)
				break;
			q->head++;
			role->n_pending--;
			expire(mgr, role, &e);
			expired++;
		}
	}
	return expired;
}

uint64_t
mgr_wakeup_next_ns(const struct mgr *mgr, const struct role_ctx *role, uint64_t now_tsc)
{
	uint64_t next_tsc = UINT64_MAX;

	if (role->n_pending == 0)
		return UINT64_MAX;
	/* (each queue's head has its earliest deadline: stale heads only make
	 * the answer early, never late) */
	for (uint16_t s = 0; s < role->n_queues; s++) {
		const struct pending_queue *q = &role->pending[s];

		if (q->head != q->tail) {
			const struct pending_entry *e = &q->e[q->head & (q->cap - 1)];

			next_tsc =
				RTE_MIN(next_tsc, e->since + timeout_now(mgr, &mgr->nfs[e->nf_id]));
		}
	}
	if (next_tsc == UINT64_MAX)
		return UINT64_MAX;
	if (next_tsc <= now_tsc)
		return 0;
	return (next_tsc - now_tsc) * 1000 / (rte_get_tsc_hz() / 1000000);
}

/* At shutdown, after the roles stopped: what the stages still hold. */
void
mgr_wakeup_drop_all_held(struct mgr *mgr, struct role_ctx *role, enum sq_drop cause)
{
	for (uint32_t id = 0; role->stages != NULL && id < mgr->n_nfs; id++)
		role->drop_held(mgr, role, id, cause);
}

/* One group: a new floor shows in the wake rate only a floor's time later,
 * so the window is at least two floors long, or the floor would keep
 * doubling on old rates and then fall back as far. */
static void
tune_core(struct core_wakes *cw, uint64_t budget, uint64_t now, uint64_t hz)
{
	uint64_t floor = atomic_load_explicit(&cw->floor_tsc, memory_order_relaxed);
	uint64_t elapsed = now - cw->window_start_tsc;
	uint64_t step = FLOOR_MIN_US * hz / 1000000;
	uint64_t wakes, timeouts, rate;
	bool by_timeout;

	if (elapsed < 2 * floor)
		return;
	wakes = atomic_load_explicit(&cw->wakes, memory_order_relaxed);
	timeouts = atomic_load_explicit(&cw->timeout_wakes, memory_order_relaxed);
	/* Wakes in a window are far below 2^64 / hz: no overflow. */
	rate = (wakes - cw->window_wakes) * hz / elapsed;
	by_timeout = timeouts != cw->window_timeout_wakes;
	cw->window_wakes = wakes;
	cw->window_timeout_wakes = timeouts;
	cw->window_start_tsc = now;
	atomic_store_explicit(&cw->rate_per_s, rate, memory_order_relaxed);
	if (budget == 0)
		floor = 0;
	else if (rate > budget && by_timeout)
		floor = RTE_MIN(RTE_MAX(2 * floor, step), FLOOR_MAX_US * hz / 1000000);
	else if (rate < budget / 2)
		floor = floor / 2 < step ? 0 : floor / 2;
	atomic_store_explicit(&cw->floor_tsc, floor, memory_order_relaxed);
}

/* Every round, so one compare until a window is due. */
void
mgr_wakeup_tune(struct mgr *mgr)
{
	uint64_t hz, now = rte_rdtsc();

	if (likely(now < mgr->next_tune_tsc))
		return;
	hz = rte_get_tsc_hz();
	mgr->next_tune_tsc = now + TUNE_WINDOW_US * hz / 1000000;
	for (unsigned int g = 0; g < SQ_CORE_GROUPS; g++)
		tune_core(&mgr->core_wakes[g], mgr->cfg->core_wakes_per_s, now, hz);
}

void
mgr_wakeup_force(struct mgr *mgr, struct mgr_nf *nf)
{
	atomic_thread_fence(memory_order_seq_cst);
	if (is_asleep(nf))
		wake(mgr, nf, WAKE_URGENT);
}
