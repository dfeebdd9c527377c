/* SPDX-License-Identifier: BSD-3-Clause
 * isolate: an isolated NF's private region and the copies in and out of it
 * (isolate.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <rte_common.h>
#include <rte_cycles.h>
#include <rte_memcpy.h>

#include <squall/pkt.h>

#include "isolate.h"
#include "nfring.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

/* A burst of copies at a time: the rings' own burst. */
#define COPY_BURST SQ_NF_BURST_MAX

struct layout {
	size_t table_off, ready_off, rx_off, tx_off, mbufs_off, len;
	uint32_t stride;
};

static struct layout
plan(uint32_t ring_slots, uint32_t n_mbufs, uint16_t data_room)
{
	size_t ring_bytes = (size_t)rte_ring_get_memsize(ring_slots);
	struct layout l;

	l.table_off = RTE_ALIGN_CEIL(sizeof(struct sq_region_hdr), RTE_CACHE_LINE_SIZE);
	l.ready_off = l.table_off + sizeof(struct sq_nf_ctl);
	/* the tx-ready word, then the msg-ready one, each on a line: the NF
	 * rings them after every burst */
	l.rx_off = RTE_ALIGN_CEIL(l.ready_off + 2 * RTE_CACHE_LINE_SIZE, RTE_CACHE_LINE_SIZE);
	l.tx_off = RTE_ALIGN_CEIL(l.rx_off + ring_bytes, RTE_CACHE_LINE_SIZE);
	l.mbufs_off = RTE_ALIGN_CEIL(l.tx_off + ring_bytes, RTE_CACHE_LINE_SIZE);
	l.stride = (uint32_t)RTE_ALIGN_CEIL(sizeof(struct rte_mbuf) + SQ_PKT_META_SIZE + data_room,
					    RTE_CACHE_LINE_SIZE);
	l.len = RTE_ALIGN_CEIL(l.mbufs_off + (size_t)n_mbufs * l.stride, (size_t)getpagesize());
	return l;
}

size_t
mgr_iso_bytes(uint32_t ring_slots, uint32_t n_mbufs, uint16_t data_room)
{
	return plan(ring_slots, n_mbufs, data_room).len;
}

static inline struct rte_mbuf *
obj(const struct mgr_iso *iso, uint32_t idx)
{
	return (struct rte_mbuf *)(iso->mbufs + (uintptr_t)idx * iso->stride);
}

/* A private mbuf's buffer, from the manager's layout, never from its
 * buf_addr (the NF's to rewrite). */
static inline char *
buf(const struct rte_mbuf *m)
{
	return (char *)(uintptr_t)m + sizeof(struct rte_mbuf) + SQ_PKT_META_SIZE;
}

/* The index of the private mbuf @p p points at, or UINT32_MAX. */
static inline uint32_t
index_of(const struct mgr_iso *iso, const void *p)
{
	uintptr_t off = (uintptr_t)p - iso->mbufs;
	uintptr_t i = off / iso->stride;

	if (off >= (uintptr_t)iso->n_mbufs * iso->stride || i * iso->stride != off)
		return UINT32_MAX;
	return (uint32_t)i;
}

/* What libsquall reads at attach. mgr_pid 0: the NF runs in a pid
 * namespace of its own, where the manager's pid means nothing; it learns
 * of the manager's end by its parent-death signal (mgr/spawn.c). */
static void
fill_hdr(struct mgr_iso *iso, const struct layout *l)
{
	struct sq_region_hdr *hdr = iso->hdr;

	hdr->magic = 0;
	atomic_thread_fence(memory_order_release);
	memset(hdr, 0, sizeof(*hdr));
	hdr->abi_version = SQ_ABI_VERSION;
	hdr->hdr_size = sizeof(*hdr);
	hdr->base_addr = (uintptr_t)hdr;
	hdr->len_bytes = iso->len;
	hdr->nf_table_off = l->table_off;
	hdr->tx_ready_off = l->ready_off;
	hdr->max_nfs = 1;
	hdr->nf_ctl_size = sizeof(struct sq_nf_ctl);
	hdr->mbuf_priv_size = SQ_PKT_META_SIZE;
	hdr->tsc_hz = iso->tsc_hz;
	hdr->mgr_pid = 0;
	atomic_store(&hdr->mgr_state, SQ_MGR_RUNNING);
	memcpy(hdr->name, iso->name, sizeof(hdr->name));
	hdr->n_ports = iso->n_ports;
	memcpy(hdr->port_names, iso->port_names, sizeof(hdr->port_names));
	atomic_thread_fence(memory_order_release);
	hdr->magic = SQ_REGION_MAGIC;
}

static void
init_mbuf(struct mgr_iso *iso, struct rte_mbuf *m)
{
	memset(m, 0, sizeof(*m) + SQ_PKT_META_SIZE);
	m->buf_addr = buf(m);
	m->buf_len = iso->data_room;
	m->data_off = RTE_MIN((uint16_t)RTE_PKTMBUF_HEADROOM, iso->data_room);
	m->priv_size = SQ_PKT_META_SIZE;
	m->nb_segs = 1;
	m->port = RTE_MBUF_PORT_INVALID;
	rte_mbuf_refcnt_set(m, 1);
}

/* Both rings as new, header and all: the last process could have written
 * any byte of them. */
static int
init_rings(struct mgr_iso *iso)
{
	int ret =
		rte_ring_init(iso->rx, "sq_iso_rx", iso->ring_slots, RING_F_SP_ENQ | RING_F_SC_DEQ);

	if (ret == 0)
		ret = rte_ring_init(iso->tx, "sq_iso_tx", iso->ring_slots,
				    RING_F_SP_ENQ | RING_F_SC_DEQ);
	return ret;
}

static void
free_all(struct mgr_iso *iso)
{
	for (uint32_t i = 0; i < iso->n_mbufs; i++) {
		iso->free[i] = iso->n_mbufs - 1 - i;
		iso->parked[i] = NULL;
	}
	iso->n_free = iso->n_mbufs;
}

/* An anonymous file, sealed at its size: the NF holds its fd, and a file
 * it could shrink would turn the manager's next copy into a SIGBUS. */
static int
make_memfd(const char *name, size_t len)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)len) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

int
mgr_iso_create(struct mgr_iso *iso, uintptr_t addr, uint32_t ring_slots, uint32_t n_mbufs,
	       uint16_t data_room, uint64_t tsc_hz, const char *name)
{
	struct layout l = plan(ring_slots, n_mbufs, data_room);
	char fd_name[64];
	void *p;
	int ret;

	memset(iso, 0, sizeof(*iso));
	iso->fd = -1;
	if (l.len > SQ_ISO_MAX_BYTES)
		return -E2BIG;
	snprintf(fd_name, sizeof(fd_name), "squall-isolated-%s", name);
	ret = make_memfd(fd_name, l.len);
	if (ret < 0)
		return ret;
	iso->fd = ret;
	p = mmap((void *)addr, l.len, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_FIXED_NOREPLACE | MAP_POPULATE, iso->fd, 0);
	if (p == MAP_FAILED || (uintptr_t)p != addr) {
		ret = p == MAP_FAILED ? -errno : -EEXIST;
		if (p != MAP_FAILED)
			munmap(p, l.len);
		goto fail;
	}
	iso->hdr = p;
	iso->len = l.len;
	iso->ctl = (struct sq_nf_ctl *)((char *)p + l.table_off);
	iso->tx_ready = (_Atomic uint64_t *)((char *)p + l.ready_off);
	iso->msg_ready = (_Atomic uint64_t *)((char *)p + l.ready_off + sizeof(uint64_t));
	iso->rx = (struct rte_ring *)((char *)p + l.rx_off);
	iso->tx = (struct rte_ring *)((char *)p + l.tx_off);
	iso->mbufs = (uintptr_t)p + l.mbufs_off;
	iso->stride = l.stride;
	iso->n_mbufs = n_mbufs;
	iso->data_room = data_room;
	iso->ring_slots = ring_slots;
	iso->tsc_hz = tsc_hz;
	snprintf(iso->name, sizeof(iso->name), "%s", name);
	iso->free = calloc(n_mbufs, sizeof(*iso->free));
	iso->parked = calloc(n_mbufs, sizeof(*iso->parked));
	if (iso->free == NULL || iso->parked == NULL) {
		ret = -ENOMEM;
		goto fail;
	}
	ret = init_rings(iso);
	if (ret < 0)
		goto fail;
	for (uint32_t i = 0; i < n_mbufs; i++)
		init_mbuf(iso, obj(iso, i));
	free_all(iso);
	fill_hdr(iso, &l);
	return 0;

fail:
	mgr_iso_destroy(iso);
	return ret;
}

void
mgr_iso_destroy(struct mgr_iso *iso)
{
	if (iso->hdr != NULL)
		munmap(iso->hdr, iso->len);
	if (iso->fd >= 0)
		close(iso->fd);
	free(iso->free);
	free(iso->parked);
	memset(iso, 0, sizeof(*iso));
	iso->fd = -1;
}

unsigned int
mgr_iso_restart(struct mgr_iso *iso, void (*drop)(struct rte_mbuf *, void *), void *arg)
{
	struct layout l = plan(iso->ring_slots, iso->n_mbufs, iso->data_room);
	unsigned int n = 0;

	for (uint32_t i = 0; i < iso->n_mbufs; i++) {
		if (iso->parked[i] == NULL)
			continue;
		drop(iso->parked[i], arg);
		n++;
	}
	free_all(iso);
	init_rings(iso); /* (a ring made once at this size: cannot fail) */
	fill_hdr(iso, &l);
	atomic_store(iso->tx_ready, 0);
	atomic_store(iso->msg_ready, 0);
	return n;
}

/* The packet as the NF may see it: bytes, lengths, the parse results and
 * the whole metadata. Every header field the NF relies on is written anew:
 * it may have rewritten them while it held this mbuf last. */
static inline void
copy_in(struct mgr_iso *iso, struct rte_mbuf *q, const struct rte_mbuf *p)
{
	uint16_t off = p->data_off, len = p->data_len;

	q->buf_addr = buf(q);
	q->buf_len = iso->data_room;
	q->data_off = off;
	q->data_len = len;
	q->pkt_len = len;
	q->nb_segs = 1;
	q->next = NULL;
	q->port = p->port;
	q->ol_flags = p->ol_flags;
	q->packet_type = p->packet_type;
	q->tx_offload = p->tx_offload;
	q->hash = p->hash;
	q->vlan_tci = p->vlan_tci;
	q->vlan_tci_outer = p->vlan_tci_outer;
	rte_memcpy(sq_pkt_meta(q), sq_pkt_meta((struct rte_mbuf *)(uintptr_t)p),
		   sizeof(struct sq_pkt_meta));
	rte_memcpy(buf(q) + off, rte_pktmbuf_mtod(p, const char *), len);
}

int
mgr_iso_enqueue(struct mgr_iso *iso, uint32_t *prod, struct rte_mbuf *const *pkts, unsigned int n,
		bool *moved)
{
	uint32_t mask = iso->ring_slots - 1;
	unsigned int done = 0;

	*moved = false;
	while (done < n) {
		unsigned int k = RTE_MIN(RTE_MIN(n - done, (unsigned int)COPY_BURST), iso->n_free);
		uint32_t idx[COPY_BURST];
		void *objs[COPY_BURST];
		bool m;
		int ret;

		if (k == 0)
			break;
		for (unsigned int i = 0; i < k; i++) {
			idx[i] = iso->free[--iso->n_free];
			objs[i] = obj(iso, idx[i]);
			copy_in(iso, objs[i], pkts[done + i]);
			iso->parked[idx[i]] = pkts[done + i];
		}
		ret = mgr_nfring_enqueue(iso->rx, mask, prod, objs, k, &m);
		*moved |= m;
		/* What did not go is free again, and its original the caller's. */
		for (unsigned int i = ret < 0 ? 0 : (unsigned int)ret; i < k; i++) {
			iso->parked[idx[i]] = NULL;
			iso->free[iso->n_free++] = idx[i];
		}
		if (ret < 0)
			return done > 0 ? (int)done : -1;
		for (unsigned int i = 0; i < (unsigned int)ret; i++)
			iso->bytes_in += pkts[done + i]->data_len;
		iso->pkts_in += (unsigned int)ret;
		done += (unsigned int)ret;
		if ((unsigned int)ret < k)
			break;
	}
	return (int)done;
}

/* The NF's result into the original @p p. Each field the NF can write is
 * read once (it may write them while we copy), and lengths are checked
 * before any byte moves. What it may write of the metadata: verdict, sig,
 * user[] and, at the first hop, nf0_tsc (a time; kept only if between the
 * packet's receipt and now). nf_visits is the manager's count. Its
 * packet_type and header lengths are not taken: the tx role parses the
 * packet again (mgr/tx.c reparse). */
static inline bool
copy_back(const struct mgr_iso *iso, struct rte_mbuf *q, struct rte_mbuf *p, uint64_t now)
{
	const struct sq_pkt_meta *qm = sq_pkt_meta(q);
	struct sq_pkt_meta *pm = sq_pkt_meta(p);
	uint16_t off = __atomic_load_n(&q->data_off, __ATOMIC_RELAXED);
	uint16_t len = __atomic_load_n(&q->data_len, __ATOMIC_RELAXED);
	uint32_t pkt_len = __atomic_load_n(&q->pkt_len, __ATOMIC_RELAXED);
	uint64_t nf0;

	if (off > iso->data_room || len > iso->data_room - off || pkt_len != len)
		return false;
	rte_memcpy((char *)p->buf_addr + off, buf(q) + off, len);
	p->data_off = off;
	p->data_len = len;
	p->pkt_len = len;
	pm->verdict = qm->verdict;
	pm->sig = qm->sig;
	pm->user[0] = qm->user[0];
	pm->user[1] = qm->user[1];
	pm->nf_visits++;
	if (pm->hop == 0) {
		nf0 = qm->nf0_tsc;
		pm->nf0_tsc = nf0 >= pm->rx_tsc && nf0 <= now ? nf0 : 0;
	}
	return true;
}

int
mgr_iso_dequeue(struct mgr_iso *iso, uint32_t *cons, struct rte_mbuf **pkts, unsigned int *n_good,
		struct rte_mbuf **bad, unsigned int *n_bad, unsigned int n)
{
	void *objs[COPY_BURST];
	uint64_t now;
	int ret;

	*n_good = *n_bad = 0;
	ret = mgr_nfring_dequeue(iso->tx, iso->ring_slots - 1, cons, objs,
				 RTE_MIN(n, (unsigned int)COPY_BURST));
	if (ret <= 0)
		return ret;
	now = rte_rdtsc();
	for (int i = 0; i < ret; i++) {
		uint32_t idx = index_of(iso, objs[i]);
		struct rte_mbuf *p;

		if (unlikely(idx == UINT32_MAX || iso->parked[idx] == NULL)) {
			iso->forged++;
			continue;
		}
		p = iso->parked[idx];
		iso->parked[idx] = NULL;
		iso->free[iso->n_free++] = idx;
		if (likely(copy_back(iso, objs[i], p, now))) {
			pkts[(*n_good)++] = p;
			iso->pkts_out++;
			iso->bytes_out += p->data_len;
		} else {
			bad[(*n_bad)++] = p;
			iso->bad_lengths++;
		}
	}
	return ret;
}
