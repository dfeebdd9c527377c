/* SPDX-License-Identifier: BSD-3-Clause
 * Scaler (DESIGN §7; seed 003 §III.B-C, Algorithm 1): the instances of a
 * service with a scale: policy follow its load, each service on its own, so
 * only a chain's bottleneck grows.
 *
 * Every interval_ms the scaler looks at each instance of the service:
 *   load  = arrivals x per-packet cost / the interval: the share of its time
 *           the instance would need for what it was offered (arrivals count
 *           the packets its full ring turned away; the cost is the handler
 *           time libsquall measures per packet, wall clock, so an NF that
 *           waits for a device counts that wait);
 *   queue = how full its rx ring is.
 * Handler time misses what an instance loses outside its handler: a core
 * shared with other tasks that runs it late, a wake that comes late. Its
 * ring overflows while its load reads a few percent. So a ring that turned
 * packets away teaches the scaler the rate that was too much: the lowest
 * rate offered to an instance whose ring overflowed in a look (the service's
 * overflow rate, kept drop_memory_ms after the last overflow), and each
 * instance's load is then at least its rate over that one. The lesson
 * outlives the overflow that taught it, so the instances it added are not
 * blocked again at the next quiet look (no flapping), and the service
 * scales in as the rate falls, as with any load.
 * Overload (the mean load over the instances that take new flows above
 * high_wm, or a ring above queue_high_pkts) held for hold_intervals looks:
 * run as many instances as the load needs at the middle of the watermarks,
 * rerunning blocked instances first (launching avoidance, §III.C) and
 * spawning only what is still missing. Underload (the mean below low_wm,
 * and one fewer would stay under high_wm) held as long: block one.
 *
 * A blocked instance takes no new flow; the flows it has stay with it until
 * they end (the director pins each flow to its instances), then it sleeps
 * on its futex like any idle NF: no CPU. A flow never moves: scale-out and
 * scale-in change only where new flows go.
 *
 * It runs on the main lcore, between rounds; an apply (control thread) holds
 * the control lock for its whole change, and a look that finds it taken
 * waits for the next round rather than block the lcore.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_common.h>
#include <rte_cycles.h>
#include <rte_ring.h>
#include <rte_spinlock.h>
#include <rte_telemetry.h>

#include "control.h"
#include "mgr.h"
#include "msg.h"
#include "scaler.h"
#include "tel_reply.h"

#define EVENTS_MAX      256 /* decisions kept for /squall/scale_events */
#define EVENTS_SHOWN    64  /* ... shown at once */
#define SAMPLES_MAX     256 /* reaction times kept for the medians */
#define READY_MAX_MS    3000
#define FIRST_PKT_MAX_S 10 /* no new flow came to a new instance: no sample */
#define BACKOFF_MIN_MS  10
#define BACKOFF_MAX_MS  5000
#define MIN_COST_PKTS   8 /* fewer handled in a look: keep the last cost */
#define RATE_EWMA_SHIFT 5 /* rates: each look weighs 1/32 (64 ms at 2 ms looks) */
/* The NF core, over windows of CORE_LOOK_MS: full when /proc/stat shows it
 * busy (jiffies: 10 ms) at CORE_FULL_PCT and its NFs' handlers took
 * CORE_WORK_PCT of it (busy alone would count idle NFs' spinning). */
#define CORE_LOOK_MS    100
#define CORE_FULL_PCT   95
#define CORE_WORK_PCT   85

enum await { AWAIT_NONE, AWAIT_SPAWN, AWAIT_RERUN };

/* What the scaler knows of one instance (by instance index). */
struct inst {
	uint64_t given, full, rx, handler; /* counters at the last look */
	uint64_t cost_tsc;                 /* handler time per packet, last known */
	uint64_t arrived, dropped;         /* in the last look */
	uint64_t rate_pps;                 /* arrivals a second, smoothed over looks */
	uint32_t cpu_pct;                  /* arrivals x handler time */
	uint32_t load_pct;                 /* ... or its rate over the overflow rate */
	uint32_t queue;
	bool starting;  /* spawned here, not running its loop yet */
	uint8_t told;   /* the last SQ_MSG_BLOCK or SQ_MSG_RERUN it took from us */
	pid_t told_pid; /* ... the process it told */
	uint8_t await;  /* enum await: its first packet is wanted */
	uint64_t mark_tsc;
	uint64_t rx_base;
};

struct svc_scale {
	uint32_t first_nf, cap; /* the service's ids when inst[] was made */
	struct inst *inst;
	uint64_t next_tsc, last_tsc;
	uint32_t over, under;   /* looks in a row */
	_Atomic int32_t target; /* by hand: instances to run; -1: the load decides */
	uint32_t n_await;
	/* as of the last look (telemetry reads) */
	uint32_t running, blocked, starting;
	uint32_t load_pct;     /* summed over its instances */
	uint32_t cpu_pct;      /* ... of it, handler time only */
	uint64_t rate_pps;     /* arrivals a second at all its instances, smoothed */
	uint64_t overflow_pps; /* an instance's ring overflowed at this rate; 0: none lately */
	uint64_t overflow_tsc; /* ... last */
	uint64_t overflows;    /* looks in which a ring of the service overflowed */
	uint32_t queue_max;
	uint32_t queue_prev; /* queue_max at the look before */
	bool was_at_max;
	bool was_core_full;
	uint64_t core_full; /* overloads not acted on: the NF core was full */
	uint64_t looks, decisions, spawns, reruns, blocks, spawn_failed, at_max;
	uint32_t backoff_ms;
	uint64_t retry_tsc;
};

struct scale_event {
	uint64_t seq, ms;
	char service[SQ_CFG_NAME_LEN];
	const char *reason;
	uint32_t load_pct, queue, from, to, spawned, rerun, blocked, failed;
};

/* The core every NF is pinned to (manager.nf_core), seen from /proc/stat. */
struct core_watch {
	uint64_t next_tsc, last_tsc;
	uint64_t busy, total; /* jiffies at the last look */
	uint64_t handler_tsc; /* summed over the NFs, at the last look */
	uint32_t busy_pct;    /* over the last window */
	uint32_t work_pct;    /* ... in the NFs' handlers (wall clock) */
	bool seen;
};

struct scaler {
	struct mgr *mgr;
	struct svc_scale svc[SQ_MAX_SERVICES];
	struct core_watch core;
	uint64_t start_tsc, next_tsc, hz;
	uint32_t n_await;
	rte_spinlock_t lock; /* events and samples: the main lcore writes, telemetry reads */
	struct scale_event ev[EVENTS_MAX];
	uint64_t n_ev;
	uint64_t out_us[SAMPLES_MAX], rerun_us[SAMPLES_MAX];
	uint64_t n_out, n_rerun;
};

static struct scaler *the_scaler; /* for the telemetry callbacks */

int
mgr_scaler_init(struct mgr *mgr)
{
	struct scaler *sc = calloc(1, sizeof(*sc));

	if (sc == NULL)
		return -ENOMEM;
	sc->mgr = mgr;
	sc->hz = rte_get_tsc_hz();
	sc->start_tsc = rte_rdtsc();
	rte_spinlock_init(&sc->lock);
	for (uint16_t s = 0; s < SQ_MAX_SERVICES; s++)
		atomic_store(&sc->svc[s].target, -1);
	mgr->scaler = sc;
	the_scaler = sc;
	return 0;
}

void
mgr_scaler_free(struct mgr *mgr)
{
	struct scaler *sc = mgr->scaler;

	if (sc == NULL)
		return;
	the_scaler = NULL;
	for (uint16_t s = 0; s < SQ_MAX_SERVICES; s++)
		free(sc->svc[s].inst);
	free(sc);
	mgr->scaler = NULL;
}

/* ---- samples and events ---- */

static void
add_sample(struct scaler *sc, enum await kind, uint64_t tsc)
{
	uint64_t us = tsc * 1000000 / sc->hz;

	rte_spinlock_lock(&sc->lock);
	if (kind == AWAIT_SPAWN)
		sc->out_us[sc->n_out++ % SAMPLES_MAX] = us;
	else
		sc->rerun_us[sc->n_rerun++ % SAMPLES_MAX] = us;
	rte_spinlock_unlock(&sc->lock);
}

static void
add_event(struct scaler *sc, const struct sq_cfg_service *cs, const struct scale_event *e)
{
	struct scale_event *slot;

	rte_spinlock_lock(&sc->lock);
	slot = &sc->ev[sc->n_ev % EVENTS_MAX];
	*slot = *e;
	slot->seq = sc->n_ev++;
	slot->ms = (rte_rdtsc() - sc->start_tsc) * 1000 / sc->hz;
	snprintf(slot->service, sizeof(slot->service), "%s", cs->name);
	rte_spinlock_unlock(&sc->lock);
	MGR_LOG(INFO,
		"scale %s: %u -> %u (%s, load %u%%, queue %u): spawned %u, rerun %u, "
		"blocked %u, failed %u\n",
		cs->name, e->from, e->to, e->reason, e->load_pct, e->queue, e->spawned, e->rerun,
		e->blocked, e->failed);
}

/* ---- instances ---- */

static struct svc_scale *
state_of(struct scaler *sc, const struct mgr_service *svc, uint16_t s)
{
	struct svc_scale *st = &sc->svc[s];

	if (st->inst != NULL && st->first_nf == svc->first_nf && st->cap == svc->cap_nfs)
		return st;
	/* a service made (or made again in a freed slot) since the last look:
	 * what was asked by hand of a slot's last service is not this one's */
	int32_t target = st->inst != NULL ? -1 : atomic_load(&st->target);

	sc->n_await -= st->n_await;
	free(st->inst);
	memset(st, 0, sizeof(*st));
	atomic_store(&st->target, target);
	st->inst = calloc(RTE_MAX(svc->cap_nfs, 1u), sizeof(*st->inst));
	if (st->inst == NULL)
		return NULL;
	st->first_nf = svc->first_nf;
	st->cap = svc->cap_nfs;
	return st;
}

/* Tell the instance what the director already acts on (nf->blocked): a
 * BLOCK lets it sleep whenever idle, even in poll mode, and a RERUN puts it
 * back to its mode (seed 003 §IV.B). A new process of the slot starts
 * running; a message its full ring turned away goes at the next look. */
static void
tell(struct mgr *mgr, struct inst *in, struct mgr_nf *nf)
{
	uint8_t want = atomic_load(&nf->blocked) ? SQ_MSG_BLOCK : SQ_MSG_RERUN;

	if (in->starting || nf->pid <= 0)
		return;
	if (nf->pid != in->told_pid) {
		in->told_pid = nf->pid;
		in->told = SQ_MSG_RERUN;
	}
	if (in->told != want && mgr_msg_send(mgr, nf, want, NULL, 0) == 0)
		in->told = want;
}

static void
set_blocked(struct mgr *mgr, struct inst *in, struct mgr_nf *nf, bool blocked)
{
	atomic_store_explicit(&nf->blocked, blocked, memory_order_relaxed);
	atomic_fetch_add_explicit(&mgr->services[nf->service].scale_gen, 1, memory_order_release);
	tell(mgr, in, nf);
}

static void
fail_backoff(struct scaler *sc, struct svc_scale *st, uint64_t now)
{
	st->spawn_failed++;
	st->backoff_ms = RTE_MIN(RTE_MAX(st->backoff_ms * 2, (uint32_t)BACKOFF_MIN_MS),
				 (uint32_t)BACKOFF_MAX_MS);
	st->retry_tsc = now + sc->hz / 1000 * st->backoff_ms;
}

static void
await_first(struct scaler *sc, struct svc_scale *st, struct inst *in, const struct mgr_nf *nf,
	    enum await kind)
{
	if (in->await == AWAIT_NONE && !in->starting) {
		st->n_await++;
		sc->n_await++;
	}
	in->await = (uint8_t)kind;
	in->rx_base = nf->ctl->rx_pkts;
}

static void
await_done(struct scaler *sc, struct svc_scale *st, struct inst *in)
{
	in->await = AWAIT_NONE;
	in->starting = false;
	st->n_await--;
	sc->n_await--;
}

/* A spawned instance runs its loop: it takes new flows now. */
static void
check_starting(struct mgr *mgr, struct scaler *sc, struct svc_scale *st, struct inst *in,
	       struct mgr_nf *nf, uint64_t now)
{
	if (nf->pid > 0 && mgr_nf_is_ready(nf)) {
		nf->scale_starting = false;
		st->backoff_ms = 0;
		nf->ready_tsc = now;
		atomic_store(&nf->live, true);
		mgr_director_nf_ready(mgr, nf);
		in->starting = false;
		in->await = AWAIT_SPAWN;
		in->rx_base = nf->ctl->rx_pkts;
		set_blocked(mgr, in, nf, false);
		return;
	}
	if (nf->pid <= 0 && atomic_load(&nf->reaped)) {
		/* died before its loop (binary gone, out of memory): counted,
		 * retried by a later look after the backoff; its slot is taken
		 * again if it was the last */
		struct mgr_service *svc = &mgr->services[nf->service];
		struct scale_event e = {.reason = "start_failed", .failed = 1};

		nf->scale_starting = false;
		fail_backoff(sc, st, now);
		await_done(sc, st, in);
		if (svc->n_nfs == (uint32_t)nf->instance + 1)
			__atomic_store_n(&svc->n_nfs, nf->instance, __ATOMIC_RELEASE);
		e.from = st->running + st->starting;
		e.to = e.from - (e.from > 0);
		add_event(sc, &mgr->cfg->services[nf->service], &e);
		return;
	}
	if (now - in->mark_tsc > sc->hz / 1000 * READY_MAX_MS && !nf->wd_killed &&
	    mgr_nf_ready_overdue(mgr, nf, READY_MAX_MS, RTE_LOG_WARNING, "; killing it")) {
		kill(nf->pid, SIGKILL);
		nf->wd_killed = true;
	}
}

/* Instances spawned or rerun: ready yet? their first packet? */
static void
check_awaiting(struct mgr *mgr, struct scaler *sc, uint64_t now)
{
	for (uint16_t s = 0; s < SQ_MAX_SERVICES && sc->n_await > 0; s++) {
		struct svc_scale *st = &sc->svc[s];

		for (uint32_t i = 0; i < st->cap && st->n_await > 0; i++) {
			struct inst *in = &st->inst[i];
			struct mgr_nf *nf = &mgr->nfs[st->first_nf + i];

			if (in->starting) {
				check_starting(mgr, sc, st, in, nf, now);
				continue;
			}
			if (in->await == AWAIT_NONE)
				continue;
			if (nf->ctl->rx_pkts != in->rx_base) {
				MGR_LOG(DEBUG,
					"scale: %s#%u first packet %" PRIu64 " us after its %s\n",
					mgr_nf_service_name(mgr, nf), nf->instance,
					(now - in->mark_tsc) * 1000000 / sc->hz,
					in->await == AWAIT_SPAWN ? "spawn" : "rerun");
				add_sample(sc, in->await, now - in->mark_tsc);
				await_done(sc, st, in);
			} else if (now - in->mark_tsc > sc->hz * FIRST_PKT_MAX_S ||
				   !atomic_load(&nf->live)) {
				await_done(sc, st, in);
			}
		}
	}
}

/* ---- a look ---- */

static uint64_t
delta(uint64_t now, uint64_t *last)
{
	uint64_t d = now >= *last ? now - *last : 0; /* a new NF in the slot counts anew */

	*last = now;
	return d;
}

static uint64_t
ewma(uint64_t avg, uint64_t now, unsigned int shift)
{
	return (uint64_t)((int64_t)avg + (((int64_t)now - (int64_t)avg) >> shift));
}

/* The instance's load and queue since the last look, @p dt cycles ago. */
static void
sample(struct mgr *mgr, struct inst *in, const struct mgr_nf *nf, uint64_t dt)
{
	const struct nf_stage *rs = &mgr->rx.stages[nf->id], *ts = &mgr->tx.stages[nf->id];
	uint64_t given = atomic_load_explicit(&rs->enq_pkts, memory_order_relaxed) +
			 atomic_load_explicit(&ts->enq_pkts, memory_order_relaxed);
	uint64_t full = rs->ring_full_pkts + ts->ring_full_pkts;
	uint64_t dropped = delta(full, &in->full);
	uint64_t arrived = delta(given, &in->given) + dropped;
	/* the NF's own counters: a lying NF moves its own service's count,
	 * within min..max, and nothing else */
	uint64_t rx = delta(nf->ctl->rx_pkts, &in->rx);
	uint64_t handler = delta(nf->ctl->handler_tsc, &in->handler);
	uint32_t tail = __atomic_load_n(&nf->rx->cons.tail, __ATOMIC_RELAXED);
	uint32_t queue = nf->rx_prod - tail;

	if (rx >= MIN_COST_PKTS)
		in->cost_tsc = RTE_MIN(handler / rx, dt);
	in->cpu_pct = dt == 0 ? 0 : (uint32_t)RTE_MIN(arrived * in->cost_tsc * 100 / dt, 100000u);
	in->arrived = arrived;
	in->dropped = dropped;
	if (dt > 0)
		in->rate_pps = ewma(in->rate_pps, arrived * rte_get_tsc_hz() / dt, RATE_EWMA_SHIFT);
	in->queue = RTE_MIN(queue, nf->rx_mask);
}

/* A look in which an instance's ring overflowed: the rate it was offered
 * is more than an instance can take here. Rates are smoothed over tens of
 * looks (a look of 2 ms holds a few dozen packets, and a late round of the
 * manager makes one a burst and the next empty); an instance's own rate
 * lags its new flows (just rerun or spawned), so it counts for at least
 * its share of the service's rate, and the flows it had before a scale-out
 * still count at it until they end. The lowest such rate is kept as the
 * service's overflow rate until drop_memory_ms pass without an overflow
 * (the core may be free again); drop_memory_ms 0 turns it off. */
static void
learn_overflow(struct scaler *sc, struct svc_scale *st, const struct sq_cfg_scale *p, uint32_t n,
	       uint64_t dt, uint64_t now)
{
	uint64_t arrived = 0, dropped = 0, per_inst, lowest = UINT64_MAX;

	for (uint32_t i = 0; i < n; i++) {
		arrived += st->inst[i].arrived;
		dropped += st->inst[i].dropped;
	}
	if (dt == 0)
		return;
	st->rate_pps = ewma(st->rate_pps, arrived * sc->hz / dt, RATE_EWMA_SHIFT);
	per_inst = st->rate_pps / RTE_MAX(st->running + st->starting, 1u);
	for (uint32_t i = 0; i < n; i++)
		if (st->inst[i].dropped > 0)
			lowest = RTE_MIN(lowest, RTE_MAX(st->inst[i].rate_pps, per_inst));
	if (st->overflow_pps > 0 && now - st->overflow_tsc > sc->hz / 1000 * p->drop_memory_ms)
		st->overflow_pps = 0;
	if (dropped == 0 || lowest == 0 || p->drop_memory_ms == 0)
		return;
	st->overflow_pps = st->overflow_pps > 0 ? RTE_MIN(st->overflow_pps, lowest) : lowest;
	st->overflow_tsc = now;
	st->overflows++;
}

/* An instance's load: its handler time, or at least its rate over the
 * service's overflow rate. */
static uint32_t
load_of(const struct svc_scale *st, const struct inst *in, uint64_t dt)
{
	uint64_t rate_pct;

	if (st->overflow_pps == 0 || dt == 0)
		return in->cpu_pct;
	rate_pct = in->rate_pps * 100 / st->overflow_pps;
	return (uint32_t)RTE_MIN(RTE_MAX(rate_pct, (uint64_t)in->cpu_pct), 100000u);
}

/* Instances [0, n_nfs): sampled, counted by state, loaded. */
static void
sample_all(struct mgr *mgr, struct scaler *sc, struct svc_scale *st, uint16_t s, uint64_t dt,
	   uint64_t now)
{
	const struct mgr_service *svc = &mgr->services[s];
	uint32_t n = RTE_MIN(svc->n_nfs, st->cap);

	st->running = st->blocked = st->starting = 0;
	st->queue_prev = st->queue_max;
	st->load_pct = st->cpu_pct = st->queue_max = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct inst *in = &st->inst[i];
		const struct mgr_nf *nf = &mgr->nfs[svc->first_nf + i];

		sample(mgr, in, nf, dt);
		if (in->starting) {
			st->starting++;
		} else if (atomic_load_explicit(&nf->blocked, memory_order_relaxed)) {
			st->blocked++;
		} else {
			st->running++;
			st->queue_max = RTE_MAX(st->queue_max, in->queue);
		}
	}
	learn_overflow(sc, st, &mgr->cfg->services[s].scale, n, dt, now);
	for (uint32_t i = 0; i < n; i++) {
		struct inst *in = &st->inst[i];

		in->load_pct = load_of(st, in, dt);
		st->load_pct += in->load_pct;
		st->cpu_pct += in->cpu_pct;
	}
}

static bool
spawn_one(struct mgr *mgr, struct scaler *sc, struct svc_scale *st, uint16_t s, uint64_t now)
{
	struct mgr_service *svc = &mgr->services[s];
	uint32_t i = svc->n_nfs;
	struct mgr_nf *nf;
	int ret;

	if (i >= svc->cap_nfs || now < st->retry_tsc)
		return false;
	nf = &mgr->nfs[svc->first_nf + i];
	ret = mgr_nfs_setup(mgr, nf->id, s, (uint16_t)i);
	atomic_store(&nf->blocked, true); /* until it runs its loop */
	if (ret == 0)
		ret = mgr_nfs_spawn(mgr, nf);
	if (ret < 0) {
		fail_backoff(sc, st, now);
		MGR_LOG(WARNING, "scale %s: instance %u did not start (%s); next try in %u ms\n",
			mgr->cfg->services[s].name, i, strerror(-ret), st->backoff_ms);
		return false;
	}
	nf->scale_starting = true;
	st->inst[i] = (struct inst){.starting = true, .mark_tsc = now};
	st->n_await++;
	sc->n_await++;
	st->spawns++;
	__atomic_store_n(&svc->n_nfs, i + 1, __ATOMIC_RELEASE);
	return true;
}

/* The blocked instance with the lowest index that runs its loop. */
static int
blocked_to_rerun(const struct mgr *mgr, const struct svc_scale *st, const struct mgr_service *svc)
{
	for (uint32_t i = 0; i < svc->n_nfs && i < st->cap; i++) {
		const struct mgr_nf *nf = &mgr->nfs[svc->first_nf + i];

		if (!st->inst[i].starting && atomic_load(&nf->blocked) && atomic_load(&nf->live))
			return (int)i;
	}
	return -1;
}

/* The running instance with the highest index. */
static int
running_to_block(const struct mgr *mgr, const struct svc_scale *st, const struct mgr_service *svc)
{
	for (uint32_t i = RTE_MIN(svc->n_nfs, st->cap); i-- > 0;) {
		const struct mgr_nf *nf = &mgr->nfs[svc->first_nf + i];

		if (!st->inst[i].starting && !atomic_load(&nf->blocked))
			return (int)i;
	}
	return -1;
}

/* Run @p want instances: rerun, then spawn; or block. One event. */
static void
act(struct mgr *mgr, struct scaler *sc, struct svc_scale *st, uint16_t s, uint32_t want,
    const char *reason, uint64_t now)
{
	const struct mgr_service *svc = &mgr->services[s];
	struct scale_event e = {.reason = reason,
				.load_pct = st->running ? st->load_pct / st->running : st->load_pct,
				.queue = st->queue_max,
				.from = st->running + st->starting};
	uint32_t have = e.from;
	int i;

	while (have < want && (i = blocked_to_rerun(mgr, st, svc)) >= 0) {
		struct mgr_nf *nf = &mgr->nfs[svc->first_nf + (uint32_t)i];

		set_blocked(mgr, &st->inst[i], nf, false);
		st->inst[i].mark_tsc = now;
		await_first(sc, st, &st->inst[i], nf, AWAIT_RERUN);
		st->reruns++;
		e.rerun++;
		have++;
	}
	while (have < want) {
		if (!spawn_one(mgr, sc, st, s, now)) {
			e.failed += svc->n_nfs < svc->cap_nfs;
			break;
		}
		e.spawned++;
		have++;
	}
	while (have > want && (i = running_to_block(mgr, st, svc)) >= 0) {
		set_blocked(mgr, &st->inst[i], &mgr->nfs[svc->first_nf + (uint32_t)i], true);
		st->blocks++;
		e.blocked++;
		have--;
	}
	e.to = have;
	st->over = st->under = 0;
	if (e.to == e.from && e.failed == 0)
		return;
	st->decisions++;
	add_event(sc, &mgr->cfg->services[s], &e);
}

/* cpuN's busy and total jiffies from /proc/stat. @return 0, or -1. */
static int
read_core(int core, uint64_t *busy, uint64_t *total)
{
	char line[256], tag[16];
	unsigned long long v[8] = {0};
	FILE *f = fopen("/proc/stat", "re");
	int ret = -1;

	if (f == NULL)
		return -1;
	snprintf(tag, sizeof(tag), "cpu%d ", core);
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, tag, strlen(tag)) != 0)
			continue;
		if (sscanf(line + strlen(tag), "%llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
			   &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) >= 4) {
			*total = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
			*busy = *total - v[3] - v[4]; /* not idle, not iowait */
			ret = 0;
		}
		break;
	}
	fclose(f);
	return ret;
}

/* Every CORE_LOOK_MS: how busy the NF core was. A scaled service whose
 * instances all share it gains nothing from one more once it is full:
 * another instance only adds switches (seed 003 gives each new instance a
 * core of its own; here they share manager.nf_core). */
/* Handler time of every NF with a process, summed (they share the core). */
static uint64_t
handlers_tsc(const struct mgr *mgr)
{
	uint64_t sum = 0;

	for (uint32_t i = 0; i < mgr->n_nfs; i++)
		if (mgr->nfs[i].pid > 0)
			sum += mgr->nfs[i].ctl->handler_tsc;
	return sum;
}

/* Every CORE_LOOK_MS: how busy the NF core was, and with what. A scaled
 * service whose instances all share it gains nothing from one more once it
 * is full of work: another instance only adds switches (seed 003 gives each
 * new instance a core of its own; here they share manager.nf_core). An NF
 * that waits inside its handler (for a device) counts as work too, but
 * leaves the core idle, so the two tests together hold. */
static void
core_look(struct mgr *mgr, struct scaler *sc, uint64_t now)
{
	struct core_watch *cw = &sc->core;
	uint64_t busy, total, handler;

	if (mgr->cfg->nf_core < 0 || now < cw->next_tsc)
		return;
	cw->next_tsc = now + sc->hz / 1000 * CORE_LOOK_MS;
	if (read_core(mgr->cfg->nf_core, &busy, &total) < 0)
		return;
	handler = handlers_tsc(mgr);
	if (cw->seen && total > cw->total && now > cw->last_tsc) {
		cw->busy_pct = (uint32_t)((busy - cw->busy) * 100 / (total - cw->total));
		/* (an NF restarted since the last look restarts its count) */
		cw->work_pct = handler > cw->handler_tsc
				       ? (uint32_t)RTE_MIN((handler - cw->handler_tsc) * 100 /
								   (now - cw->last_tsc),
							   (uint64_t)UINT32_MAX)
				       : 0;
	}
	cw->busy = busy;
	cw->total = total;
	cw->handler_tsc = handler;
	cw->last_tsc = now;
	cw->seen = true;
}

static bool
core_full(const struct mgr *mgr, const struct scaler *sc)
{
	return mgr->cfg->nf_core >= 0 && sc->core.busy_pct >= CORE_FULL_PCT &&
	       sc->core.work_pct >= CORE_WORK_PCT;
}

/* What made the overload: handler time, a rate that overflowed a ring
 * before, or a queue that grows. */
static const char *
overload_reason(const struct svc_scale *st, const struct sq_cfg_scale *p, uint32_t avg)
{
	uint32_t cpu_avg = st->running ? st->cpu_pct / st->running : st->cpu_pct;

	if (cpu_avg > p->high_wm_pct)
		return "overload_load";
	return avg > p->high_wm_pct ? "overload_drops" : "overload_queue";
}

static void
decide(struct mgr *mgr, struct scaler *sc, struct svc_scale *st, uint16_t s, uint64_t now)
{
	const struct sq_cfg_scale *p = &mgr->cfg->services[s].scale;
	int32_t target = atomic_load(&st->target);
	uint32_t have = st->running + st->starting;
	uint32_t avg = st->running ? st->load_pct / st->running : st->load_pct;
	uint32_t mid = (p->high_wm_pct + p->low_wm_pct) / 2;
	bool over, under;

	if (target >= 0) {
		if ((uint32_t)target != have)
			act(mgr, sc, st, s, (uint32_t)target, "by_hand", now);
		return;
	}
	/* a queue that drains (a backlog from before the last scale-out) is
	 * no reason for more */
	over = avg > p->high_wm_pct ||
	       (st->queue_max > p->queue_high_pkts && st->queue_max >= st->queue_prev);
	under = !over && st->running > p->min && avg < p->low_wm_pct &&
		(uint64_t)st->load_pct < (uint64_t)(st->running - 1) * p->high_wm_pct;
	st->over = over && st->starting == 0 ? st->over + 1 : 0;
	st->under = under && st->starting == 0 ? st->under + 1 : 0;
	if (have < p->min) {
		act(mgr, sc, st, s, p->min, "below_min", now);
	} else if (have > p->max) {
		act(mgr, sc, st, s, p->max, "above_max", now);
	} else if (st->over >= p->hold_intervals) {
		uint32_t want = RTE_MAX(have + 1, (st->load_pct + mid - 1) / RTE_MAX(mid, 1u));

		want = RTE_MIN(want, p->max);
		if (want <= have) {
			st->at_max += !st->was_at_max;
			st->was_at_max = true;
			st->over = 0;
			return;
		}
		if (core_full(mgr, sc)) {
			st->core_full += !st->was_core_full;
			st->was_core_full = true;
			st->over = 0;
			return;
		}
		act(mgr, sc, st, s, want, overload_reason(st, p, avg), now);
	} else if (st->under >= p->hold_intervals) {
		act(mgr, sc, st, s, have - 1, "underload", now);
	}
	if (have < p->max)
		st->was_at_max = false;
	if (!core_full(mgr, sc))
		st->was_core_full = false;
}

static void
look(struct mgr *mgr, struct scaler *sc, uint16_t s, uint64_t now)
{
	const struct sq_cfg_service *cs = &mgr->cfg->services[s];
	struct mgr_service *svc = &mgr->services[s];
	struct svc_scale *st = state_of(sc, svc, s);
	uint64_t dt;

	if (st == NULL || now < st->next_tsc)
		return;
	st->next_tsc = now + sc->hz / 1000 * cs->scale.interval_ms;
	dt = st->last_tsc == 0 ? 0 : now - st->last_tsc;
	st->last_tsc = now;
	sample_all(mgr, sc, st, s, dt, now);
	for (uint32_t i = 0; i < svc->n_nfs && i < st->cap; i++)
		tell(mgr, &st->inst[i], &mgr->nfs[svc->first_nf + i]);
	st->looks++;
	if (dt == 0 || atomic_load(&svc->failed))
		return; /* the first look only sets where the counters are */
	decide(mgr, sc, st, s, now);
}

void
mgr_scaler_poll(struct mgr *mgr, uint64_t now)
{
	struct scaler *sc = mgr->scaler;

	if (sc == NULL)
		return;
	if (unlikely(sc->n_await > 0))
		check_awaiting(mgr, sc, now);
	if (now < sc->next_tsc)
		return;
	/* at most a look a millisecond; each service's interval inside */
	sc->next_tsc = now + sc->hz / 1000;
	if (!mgr_control_trylock())
		return;
	core_look(mgr, sc, now);
	for (uint16_t s = 0; s < mgr->cfg->n_services; s++)
		if (mgr->cfg->services[s].scale.enabled && !mgr->cfg->services[s].draining &&
		    mgr->services[s].cap_nfs > 0)
			look(mgr, sc, s, now);
	mgr_control_unlock();
}

/* ---- telemetry ---- */

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* The median of the last samples, 0 if none. */
static uint64_t
median(const uint64_t *samples, uint64_t n)
{
	uint64_t v[SAMPLES_MAX];
	size_t k = (size_t)RTE_MIN(n, (uint64_t)SAMPLES_MAX);

	if (k == 0)
		return 0;
	memcpy(v, samples, k * sizeof(*v));
	qsort(v, k, sizeof(*v), cmp_u64);
	return v[k / 2];
}

static void
add_service(struct rte_tel_data *d, const struct mgr *mgr, const struct scaler *sc, uint16_t s)
{
	const struct sq_cfg_service *cs = &mgr->cfg->services[s];
	const struct svc_scale *st = &sc->svc[s];
	struct rte_tel_data *c = rte_tel_data_alloc();
	int32_t target = atomic_load(&st->target);

	if (c == NULL)
		return;
	rte_tel_data_start_dict(c);
	rte_tel_data_add_dict_string(c, "name", cs->name);
	rte_tel_data_add_dict_u64(c, "min", cs->scale.min);
	rte_tel_data_add_dict_u64(c, "max", cs->scale.max);
	if (target < 0)
		rte_tel_data_add_dict_string(c, "target", "auto");
	else
		rte_tel_data_add_dict_u64(c, "target", (uint64_t)target);
	rte_tel_data_add_dict_u64(c, "instances", mgr->services[s].n_nfs);
	rte_tel_data_add_dict_u64(c, "running", st->running);
	rte_tel_data_add_dict_u64(c, "blocked", st->blocked);
	rte_tel_data_add_dict_u64(c, "starting", st->starting);
	rte_tel_data_add_dict_u64(c, "load_pct", st->load_pct);
	rte_tel_data_add_dict_u64(c, "cpu_load_pct", st->cpu_pct);
	rte_tel_data_add_dict_u64(c, "overflow_pps", st->overflow_pps);
	rte_tel_data_add_dict_u64(c, "overflows", st->overflows);
	rte_tel_data_add_dict_u64(c, "queue_max", st->queue_max);
	rte_tel_data_add_dict_u64(c, "over", st->over);
	rte_tel_data_add_dict_u64(c, "under", st->under);
	rte_tel_data_add_dict_u64(c, "looks", st->looks);
	rte_tel_data_add_dict_u64(c, "decisions", st->decisions);
	rte_tel_data_add_dict_u64(c, "spawns", st->spawns);
	rte_tel_data_add_dict_u64(c, "reruns", st->reruns);
	rte_tel_data_add_dict_u64(c, "blocks", st->blocks);
	rte_tel_data_add_dict_u64(c, "spawn_failed", st->spawn_failed);
	rte_tel_data_add_dict_u64(c, "at_max", st->at_max);
	rte_tel_data_add_dict_u64(c, "core_full", st->core_full);
	if (rte_tel_data_add_dict_container(d, cs->name, c, 0) < 0)
		rte_tel_data_free(c);
}

/* {SERVICE: {...}, "events": N, "scale_out_us_p50": ..., "rerun_us_p50": ...} */
int
mgr_scaler_tel_scale(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct scaler *sc = the_scaler;
	uint64_t out, rerun, n_out, n_rerun, n_ev;

	(void)cmd;
	(void)params;
	if (sc == NULL)
		return mgr_tel_error(d, "the scaler is not running");
	rte_tel_data_start_dict(d);
	for (uint16_t s = 0; s < sc->mgr->cfg->n_services; s++)
		if (sc->mgr->cfg->services[s].scale.enabled && sc->mgr->services[s].cap_nfs > 0)
			add_service(d, sc->mgr, sc, s);
	rte_spinlock_lock(&sc->lock);
	out = median(sc->out_us, sc->n_out);
	rerun = median(sc->rerun_us, sc->n_rerun);
	n_out = sc->n_out;
	n_rerun = sc->n_rerun;
	n_ev = sc->n_ev;
	rte_spinlock_unlock(&sc->lock);
	rte_tel_data_add_dict_u64(d, "events", n_ev);
	rte_tel_data_add_dict_u64(d, "nf_core_busy_pct", sc->core.busy_pct);
	rte_tel_data_add_dict_u64(d, "nf_core_work_pct", sc->core.work_pct);
	rte_tel_data_add_dict_u64(d, "scale_out_us_p50", out);
	rte_tel_data_add_dict_u64(d, "scale_out_samples", n_out);
	rte_tel_data_add_dict_u64(d, "rerun_us_p50", rerun);
	rte_tel_data_add_dict_u64(d, "rerun_samples", n_rerun);
	return 0;
}

static void
add_event_dict(struct rte_tel_data *d, const struct scale_event *e)
{
	struct rte_tel_data *c = rte_tel_data_alloc();
	char key[32];

	if (c == NULL)
		return;
	rte_tel_data_start_dict(c);
	rte_tel_data_add_dict_u64(c, "seq", e->seq);
	rte_tel_data_add_dict_u64(c, "ms", e->ms);
	rte_tel_data_add_dict_string(c, "service", e->service);
	rte_tel_data_add_dict_string(c, "reason", e->reason);
	rte_tel_data_add_dict_u64(c, "load_pct", e->load_pct);
	rte_tel_data_add_dict_u64(c, "queue", e->queue);
	rte_tel_data_add_dict_u64(c, "from", e->from);
	rte_tel_data_add_dict_u64(c, "to", e->to);
	rte_tel_data_add_dict_u64(c, "spawned", e->spawned);
	rte_tel_data_add_dict_u64(c, "rerun", e->rerun);
	rte_tel_data_add_dict_u64(c, "blocked", e->blocked);
	rte_tel_data_add_dict_u64(c, "failed", e->failed);
	snprintf(key, sizeof(key), "e%08" PRIu64, e->seq);
	if (rte_tel_data_add_dict_container(d, key, c, 0) < 0)
		rte_tel_data_free(c);
}

/* The decisions after seq SINCE (default: the last EVENTS_SHOWN), oldest first. */
int
mgr_scaler_tel_events(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct scaler *sc = the_scaler;
	struct scale_event copy[EVENTS_SHOWN];
	uint64_t since = 0, first, n;
	size_t k = 0;
	char *end;

	(void)cmd;
	if (sc == NULL)
		return mgr_tel_error(d, "the scaler is not running");
	if (params != NULL && params[0] != '\0') {
		since = strtoull(params, &end, 10) + 1;
		if (*end != '\0')
			return mgr_tel_error(
				d, "usage: /squall/scale_events[,SEQ] (events after SEQ)");
	}
	rte_spinlock_lock(&sc->lock);
	n = sc->n_ev;
	first = RTE_MAX(since, n > EVENTS_SHOWN ? n - EVENTS_SHOWN : 0);
	for (uint64_t q = first; q < n; q++)
		copy[k++] = sc->ev[q % EVENTS_MAX];
	rte_spinlock_unlock(&sc->lock);
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_u64(d, "events", n);
	for (size_t i = 0; i < k; i++)
		add_event_dict(d, &copy[i]);
	return 0;
}

static const char *
inst_state(const struct inst *in, const struct mgr_nf *nf)
{
	if (in->starting)
		return "starting";
	if (!atomic_load(&nf->live))
		return "down";
	if (!atomic_load(&nf->blocked))
		return "running";
	return atomic_load(&nf->flows) > 0 ? "draining" : "blocked";
}

/* /squall/scale_nfs,SERVICE: its instances (the first 250). */
int
mgr_scaler_tel_nfs(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct scaler *sc = the_scaler;
	const struct mgr *mgr;
	const struct svc_scale *st;
	uint64_t ns_per_tsc_x1k;
	int s;

	(void)cmd;
	if (sc == NULL)
		return mgr_tel_error(d, "the scaler is not running");
	mgr = sc->mgr;
	s = params != NULL ? sq_config_service_index(mgr->cfg, params) : -1;
	if (s < 0 || !mgr->cfg->services[s].scale.enabled)
		return mgr_tel_error(d, "usage: /squall/scale_nfs,SERVICE (a service with scale:)");
	st = &sc->svc[s];
	ns_per_tsc_x1k = 1000000000000ull / sc->hz;
	rte_tel_data_start_dict(d);
	for (uint32_t i = 0;
	     st->inst != NULL && i < mgr->services[s].n_nfs && i < st->cap && i < 250; i++) {
		const struct inst *in = &st->inst[i];
		const struct mgr_nf *nf = &mgr->nfs[st->first_nf + i];
		struct rte_tel_data *c = rte_tel_data_alloc();
		char key[16];

		if (c == NULL)
			break;
		rte_tel_data_start_dict(c);
		rte_tel_data_add_dict_u64(c, "nf", nf->id);
		rte_tel_data_add_dict_u64(c, "instance", i);
		rte_tel_data_add_dict_string(c, "state", inst_state(in, nf));
		rte_tel_data_add_dict_u64(c, "pid", nf->pid > 0 ? (uint64_t)nf->pid : 0);
		rte_tel_data_add_dict_u64(c, "flows", atomic_load(&nf->flows));
		rte_tel_data_add_dict_u64(c, "load_pct", in->load_pct);
		rte_tel_data_add_dict_u64(c, "cpu_load_pct", in->cpu_pct);
		rte_tel_data_add_dict_u64(c, "queue", in->queue);
		rte_tel_data_add_dict_u64(c, "cost_ns", in->cost_tsc * ns_per_tsc_x1k / 1000);
		rte_tel_data_add_dict_u64(c, "rx_pkts", nf->ctl->rx_pkts);
		/* what the NF itself last said it is (its acknowledgement) */
		rte_tel_data_add_dict_string(
			c, "acked",
			mgr_msg_acked(mgr, nf->id) == SQ_MSG_BLOCKED   ? "blocked"
			: mgr_msg_acked(mgr, nf->id) == SQ_MSG_RUNNING ? "running"
								       : "");
		snprintf(key, sizeof(key), "i%u", i);
		if (rte_tel_data_add_dict_container(d, key, c, 0) < 0)
			rte_tel_data_free(c);
	}
	return 0;
}

/* /squall/scale_set,SERVICE,N|auto: run N instances whatever the load, or
 * let the load decide again. Taken at the service's next look. */
int
mgr_scaler_tel_set(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct scaler *sc = the_scaler;
	char name[SQ_CFG_NAME_LEN], *end;
	const struct sq_cfg_service *cs;
	const char *comma;
	long n = -1;
	int s;

	(void)cmd;
	if (sc == NULL)
		return mgr_tel_error(d, "the scaler is not running");
	comma = params != NULL ? strchr(params, ',') : NULL;
	if (comma == NULL || (size_t)(comma - params) >= sizeof(name))
		return mgr_tel_error(d, "usage: /squall/scale_set,SERVICE,N|auto");
	memcpy(name, params, (size_t)(comma - params));
	name[comma - params] = '\0';
	s = sq_config_service_index(sc->mgr->cfg, name);
	if (s < 0)
		return mgr_tel_error(d, "no such service");
	cs = &sc->mgr->cfg->services[s];
	if (!cs->scale.enabled)
		return mgr_tel_error(d,
				     "the service has no scale: policy (its instances are fixed; "
				     "change them with apply)");
	if (strcmp(comma + 1, "auto") != 0) {
		n = strtol(comma + 1, &end, 10);
		if (comma[1] == '\0' || *end != '\0' || n < 1 || n > (long)cs->scale.max)
			return mgr_tel_error(d, "N must be 1..scale.max, or auto");
	}
	atomic_store(&sc->svc[s].target, (int32_t)n);
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_string(d, "service", cs->name);
	if (n < 0)
		rte_tel_data_add_dict_string(d, "target", "auto");
	else
		rte_tel_data_add_dict_u64(d, "target", (uint64_t)n);
	return 0;
}
