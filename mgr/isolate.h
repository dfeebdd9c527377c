/* SPDX-License-Identifier: BSD-3-Clause
 * isolate: the private region of an isolated NF (`sandbox: isolated`,
 * DESIGN §2, seed 004 architecture #4: isolated buffers, a copy per hop).
 *
 * The NF maps this region and nothing else of the manager's: its own small
 * pool of mbufs, its two rings and one control block, in the layout
 * libsquall already knows (include/squall/region.h: a region of one NF
 * slot, id 0), so the NF binary runs unchanged. The region is a sealed
 * memfd (it cannot be grown or shrunk under the manager) that the manager
 * maps at the same address as the NF, and hands to that NF alone.
 *
 * The manager's packets never enter it: a packet given to the NF is copied
 * (data, the header fields and metadata an NF may read) into a private mbuf,
 * and the original waits, parked, in the manager's own memory. A private
 * mbuf handed back is checked (one of this region's, at an object's start,
 * given and not taken back) and its result copied back into the original:
 * the bytes, the lengths (if they make sense) and what an NF may write of
 * the metadata (verdict, sig, user[]); the rest of the metadata stays the
 * manager's. No manager state: the roles call it with their own.
 */
#ifndef SQUALL_MGR_ISOLATE_H
#define SQUALL_MGR_ISOLATE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <rte_mbuf.h>
#include <rte_ring.h>

#include <squall/region.h>

/* Below the main region (SQ_REGION_BASE_ADDR): private regions are placed
 * one after another from here, each at its own address in the manager. */
#define SQ_ISO_BASE_ADDR 0x3e0000000000ULL
#define SQ_ISO_SPAN      (SQ_REGION_BASE_ADDR - SQ_ISO_BASE_ADDR)
/* Largest private region: a pool of this many bytes is a config error. */
#define SQ_ISO_MAX_BYTES (256ull << 20)

struct mgr_iso {
	struct sq_region_hdr *hdr; /* the private region, at the same address in the NF */
	size_t len;
	int fd;                     /* the sealed memfd the NF inherits */
	struct sq_nf_ctl *ctl;      /* the NF's control block (slot 0) */
	struct rte_ring *rx;        /* manager -> NF: private mbufs */
	struct rte_ring *tx;        /* NF -> manager */
	_Atomic uint64_t *tx_ready; /* the NF's doorbells: one word each, bit 0 */
	_Atomic uint64_t *msg_ready;
	uintptr_t mbufs; /* the first private mbuf */
	uint32_t stride; /* bytes from one to the next */
	uint32_t n_mbufs;
	uint16_t data_room;
	uint32_t ring_slots;
	uint64_t tsc_hz;
	char name[SQ_NAME_LEN]; /* the header's, written again at each restart */
	/* The manager's port names, as in the shared header: an NF names ports
	 * in its rules (conntrack's `bind PORT`), isolated or not. */
	uint32_t n_ports;
	char port_names[16][SQ_NAME_LEN];
	uint32_t *free; /* indexes of private mbufs the NF does not hold */
	uint32_t n_free;
	struct rte_mbuf **parked; /* per private mbuf: the original it carries; NULL: free */
	/* What the copies did (the manager's own counts). */
	uint64_t pkts_in, bytes_in;   /* copied to the NF */
	uint64_t pkts_out, bytes_out; /* copied back */
	uint64_t forged;              /* handed back: no private mbuf it held */
	uint64_t bad_lengths;         /* handed back with lengths that make no sense */
	struct mgr_iso *retired_next; /* nfs.c: kept mapped until the manager stops */
};

/* Bytes of a private region for @p ring_slots rings and @p n_mbufs mbufs of
 * @p data_room bytes each (the config checks it against SQ_ISO_MAX_BYTES). */
size_t mgr_iso_bytes(uint32_t ring_slots, uint32_t n_mbufs, uint16_t data_room);

/* Make a private region at @p addr (page aligned, SQ_ISO_MAX_BYTES of
 * address space free there) with rings of @p ring_slots and @p n_mbufs
 * mbufs; @p name names the memfd and the header. @return 0 or -errno. */
int mgr_iso_create(struct mgr_iso *iso, uintptr_t addr, uint32_t ring_slots, uint32_t n_mbufs,
		   uint16_t data_room, uint64_t tsc_hz, const char *name);
void mgr_iso_destroy(struct mgr_iso *iso);

/* Before a new process of the slot starts: the header written again (the
 * last process could rewrite it), both rings empty, every private mbuf
 * free. Originals still parked are handed to @p drop, one call each.
 * @return how many. */
unsigned int mgr_iso_restart(struct mgr_iso *iso, void (*drop)(struct rte_mbuf *, void *),
			     void *arg);

/* Copies of up to @p n single-segment packets onto the NF's rx ring, the
 * manager's producer position at *prod (nfring.h). @return how many of
 * @p pkts went, from the first (the originals are parked), or -1 if the
 * ring makes no sense any more. */
int mgr_iso_enqueue(struct mgr_iso *iso, uint32_t *prod, struct rte_mbuf *const *pkts,
		    unsigned int n, bool *moved);

/* Up to @p n of what the NF handed back, the manager's consumer position at
 * *cons: the originals with the NF's results copied in, in order, in
 * @p pkts (good) and @p bad (lengths that make no sense: their data is the
 * original's). Descriptors that are no private mbuf the NF held are
 * counted in forged and skipped. @return descriptors dequeued (*n_good +
 * *n_bad + forged ones), or -1 if the ring makes no sense any more. */
int mgr_iso_dequeue(struct mgr_iso *iso, uint32_t *cons, struct rte_mbuf **pkts,
		    unsigned int *n_good, struct rte_mbuf **bad, unsigned int *n_bad,
		    unsigned int n);

/* The NF rang its tx (or msg) doorbell since the last call: cleared. */
static inline bool
mgr_iso_take_doorbell(_Atomic uint64_t *word)
{
	if (atomic_load_explicit(word, memory_order_relaxed) == 0)
		return false;
	return atomic_exchange_explicit(word, 0, memory_order_seq_cst) != 0;
}

/* Originals the NF holds copies of. */
static inline uint32_t
mgr_iso_held(const struct mgr_iso *iso)
{
	return iso->n_mbufs - iso->n_free;
}

#endif /* SQUALL_MGR_ISOLATE_H */
