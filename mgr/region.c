/* SPDX-License-Identifier: BSD-3-Clause
 * The shared region (DESIGN §2): an unlinked hugetlbfs file mapped at a fixed address,
 * holding the mbufs, every NF ring and the NF control blocks. NFs map the
 * same file at the same address. The mbufs' memory and the rings are carved
 * out of it by the manager (carve.h), whose records of what is where stay in
 * its own memory: no allocator's bookkeeping is in a page an NF maps.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <rte_mempool.h>

#include "guard.h"
#include "mgr.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

/* Where the symlink to the region fd is published (NFs started by hand). */
#define SQ_REGION_LINK_DIR "/dev/shm"
#define POOL_CACHE         256

static bool
dir_is_hugetlbfs(const char *dir, size_t *page_bytes)
{
	struct statfs st;

	if (statfs(dir, &st) < 0 || st.f_type != HUGETLBFS_MAGIC)
		return false;
	*page_bytes = (size_t)st.f_bsize;
	return true;
}

/* Pick where the region file goes: hugetlbfs when it is there, else /dev/shm. */
static void
choose_dir(const char *want, char *dir, size_t len, size_t *page_bytes)
{
	if (want != NULL) {
		snprintf(dir, len, "%s", want);
		if (!dir_is_hugetlbfs(dir, page_bytes))
			*page_bytes = (size_t)sysconf(_SC_PAGESIZE);
		return;
	}
	if (dir_is_hugetlbfs("/dev/hugepages", page_bytes)) {
		snprintf(dir, len, "/dev/hugepages");
		return;
	}
	snprintf(dir, len, "/dev/shm");
	*page_bytes = (size_t)sysconf(_SC_PAGESIZE);
}

/* A region path left by a manager that died (a symlink into the /proc of a
 * gone process, or a region file of an older manager): remove it; one whose
 * manager still runs: refuse, two managers of one name would share nothing. */
static int
remove_stale(const char *path)
{
	struct sq_region_hdr hdr;
	ssize_t n = 0;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno != ENOENT)
		return -errno;
	if (fd >= 0) {
		n = pread(fd, &hdr, sizeof(hdr), 0);
		close(fd);
	}
	if (n == (ssize_t)sizeof(hdr) && hdr.magic == SQ_REGION_MAGIC && hdr.mgr_pid > 0 &&
	    hdr.mgr_pid != getpid() && kill(hdr.mgr_pid, 0) == 0) {
		MGR_LOG(ERR, "%s is in use by squall-mgr pid %d; pick another manager.name\n", path,
			hdr.mgr_pid);
		return -EBUSY;
	}
	if (unlink(path) < 0)
		return errno == ENOENT ? 0 : -errno;
	MGR_LOG(NOTICE, "removed stale region %s\n", path);
	return 0;
}

/* The region is an unlinked file (hugetlbfs, else /dev/shm) held open by the
 * manager and by every NF's mapping: the kernel frees its pages with the
 * last holder, so a manager killed by SIGKILL leaves no hugepage behind once
 * its NFs have gone. Spawned NFs inherit the fd; NFs started by hand open
 * /dev/shm/squall-NAME.region, a symlink to /proc/<manager pid>/fd/<fd>
 * (root or the manager's uid), which dangles, holding nothing, once the
 * manager is gone. On tmpfs: hugetlbfs may refuse symlinks. */
static int
map_file(struct mgr *mgr, const char *dir, size_t len)
{
	char tmp[SQ_CFG_PATH_LEN + 48], target[64];
	void *addr;
	int fd, ret;

	if (snprintf(mgr->region_path, sizeof(mgr->region_path), "%s/squall-%s.region",
		     SQ_REGION_LINK_DIR, mgr->cfg->name) >= (int)sizeof(mgr->region_path) ||
	    snprintf(tmp, sizeof(tmp), "%s/squall-%s.region.XXXXXX", dir, mgr->cfg->name) >=
		    (int)sizeof(tmp)) {
		mgr->region_path[0] = '\0';
		return -ENAMETOOLONG;
	}
	ret = remove_stale(mgr->region_path);
	if (ret < 0)
		goto out_path;
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		MGR_LOG(ERR, "%s: %s\n", tmp, strerror(errno));
		goto out_path;
	}
	unlink(tmp);
	if (ftruncate(fd, (off_t)len) < 0) {
		ret = -errno;
		MGR_LOG(ERR, "%s: cannot size to %zu bytes: %s\n", mgr->region_path, len,
			strerror(errno));
		goto out_close;
	}
	/* MAP_POPULATE: fault every hugepage now, so a short hugepage supply fails
	 * here with a message instead of SIGBUS in the dataplane later. */
	addr = mmap((void *)SQ_REGION_BASE_ADDR, len, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_FIXED_NOREPLACE | MAP_POPULATE, fd, 0);
	if (addr == MAP_FAILED || (uintptr_t)addr != SQ_REGION_BASE_ADDR) {
		ret = addr == MAP_FAILED ? -errno : -EEXIST;
		if (addr != MAP_FAILED)
			munmap(addr, len);
		MGR_LOG(ERR, "%s: cannot map %zu MiB at %#llx: %s (enough free hugepages?)\n",
			mgr->region_path, len >> 20, SQ_REGION_BASE_ADDR, strerror(-ret));
		goto out_close;
	}
	snprintf(target, sizeof(target), "/proc/%d/fd/%d", (int)getpid(), fd);
	if (symlink(target, mgr->region_path) < 0) {
		ret = -errno;
		MGR_LOG(ERR, "%s: %s\n", mgr->region_path, strerror(errno));
		munmap(addr, len);
		goto out_close;
	}
	mgr->region_fd = fd;
	mgr->region = addr;
	return 0;

out_close:
	close(fd);
out_path:
	mgr->region_path[0] = '\0';
	return ret;
}

static void
fill_header(struct mgr *mgr, size_t len, uint32_t max_nfs, size_t table_off, size_t ready_off)
{
	struct sq_region_hdr *hdr = mgr->region;

	hdr->abi_version = SQ_ABI_VERSION;
	hdr->hdr_size = sizeof(*hdr);
	hdr->base_addr = SQ_REGION_BASE_ADDR;
	hdr->len_bytes = len;
	hdr->nf_table_off = table_off;
	hdr->tx_ready_off = ready_off;
	mgr->tx_ready_off = ready_off;
	mgr->tx_ready = (_Atomic uint64_t *)((uintptr_t)hdr + ready_off);
	mgr->msg_ready = mgr->tx_ready + sq_tx_ready_words(max_nfs);
	hdr->max_nfs = max_nfs;
	hdr->nf_ctl_size = sizeof(struct sq_nf_ctl);
	hdr->mbuf_priv_size = SQ_PKT_META_SIZE;
	hdr->tsc_hz = rte_get_tsc_hz();
	hdr->mgr_pid = getpid();
	mgr->mgr_state = SQ_MGR_STARTING;
	atomic_store(&hdr->mgr_state, SQ_MGR_STARTING);
	snprintf(hdr->name, sizeof(hdr->name), "%s", mgr->cfg->name);
	/* Magic last: an NF that reads a half-written header sees no magic. */
	atomic_thread_fence(memory_order_release);
	hdr->magic = SQ_REGION_MAGIC;
}

/* Clear every packet's metadata once: an NF sees zeros, not what the
 * memory held before. */
static void
clear_meta(struct rte_mempool *mp, void *opaque, void *obj, unsigned int idx)
{
	(void)mp;
	(void)opaque;
	(void)idx;
	memset(sq_pkt_meta(obj), 0, sizeof(struct sq_pkt_meta));
}

static int
init_carve(struct mgr *mgr, size_t carve_off, size_t len, size_t page_bytes)
{
	int ret = carve_init(&mgr->carve, (char *)mgr->region + carve_off, len - carve_off);

	if (ret < 0)
		return ret;
	mgr->region_page_bytes = page_bytes;
	return 0;
}

/* The mbufs themselves in the region, and nothing else of the pool: its
 * header, per-lcore caches and free ring are in the manager's own EAL
 * memory, which no NF maps. An NF needs none of them (it frees nothing: it
 * hands every packet back), and one that could write them could make the
 * manager's next alloc or free hand out an mbuf twice, or read past the
 * ring. What rte_pktmbuf_pool_create does, with the objects' memory carved
 * from the region apart. */
static int
populate_in_region(struct mgr *mgr, struct rte_mempool *mp)
{
	/* Objects packed end to end (RTE_MEMPOOL_F_NO_IOVA_CONTIG: none needs
	 * to stay within a page, the region's pages having no IOVA anyway). */
	size_t size = (size_t)mp->size * (mp->header_size + mp->elt_size + mp->trailer_size);
	void *mem = carve_alloc(&mgr->carve, size, 0);
	int ret;

	if (mem == NULL)
		return -ENOMEM;
	/* (IOVA unknown: the ports Squall runs on use virtual addresses; the
	 * memory goes back with the region, not with the pool) */
	ret = rte_mempool_populate_iova(mp, mem, RTE_BAD_IOVA, size, NULL, NULL);
	if (ret < 0)
		return ret;
	return mp->populated_size == mp->size ? 0 : -ENOMEM;
}

static struct rte_mempool *
pool_create(struct mgr *mgr, const char *name, uint32_t n, uint16_t data_room)
{
	struct rte_pktmbuf_pool_private priv = {
		.mbuf_data_room_size = data_room,
		.mbuf_priv_size = SQ_PKT_META_SIZE,
	};
	struct rte_mempool *mp;
	int ret;

	mp = rte_mempool_create_empty(
		name, n, sizeof(struct rte_mbuf) + SQ_PKT_META_SIZE + data_room, POOL_CACHE,
		sizeof(priv), (int)rte_socket_id(), RTE_MEMPOOL_F_NO_IOVA_CONTIG);
	if (mp == NULL)
		return NULL;
	ret = rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(), NULL);
	if (ret == 0) {
		rte_pktmbuf_pool_init(mp, &priv);
		ret = populate_in_region(mgr, mp);
	}
	if (ret != 0) {
		rte_mempool_free(mp);
		rte_errno = -ret;
		return NULL;
	}
	rte_mempool_obj_iter(mp, rte_pktmbuf_init, NULL);
	return mp;
}

static int
create_pool(struct mgr *mgr)
{
	const struct sq_config *cfg = mgr->cfg;
	int ret;

	mgr->pool = pool_create(mgr, "sq_pool", cfg->mbufs, (uint16_t)cfg->mbuf_data_room);
	if (mgr->pool == NULL) {
		MGR_LOG(ERR,
			"cannot create a pool of %u mbufs in the %u MiB region: %s "
			"(raise manager.region_mb or lower manager.mbufs)\n",
			cfg->mbufs, cfg->region_mb, rte_strerror(rte_errno));
		return -ENOMEM;
	}
	rte_mempool_obj_iter(mgr->pool, clear_meta, NULL);
	ret = mgr_guard_init(mgr->pool, (void *)mgr->carve.base, mgr->carve.len,
			     mgr->region_page_bytes);
	if (ret < 0)
		MGR_LOG(ERR, "the mbuf pool's layout is not one the guard maps: %s\n",
			strerror(-ret));
	return ret;
}

int
mgr_region_create(struct mgr *mgr, const char *want_dir)
{
	size_t len = (size_t)mgr->cfg->region_mb << 20;
	uint32_t max_nfs = sq_config_max_nfs(mgr->cfg);
	size_t page_bytes, table_off, ready_off, carve_off;
	char dir[SQ_CFG_PATH_LEN];
	int ret;

	choose_dir(want_dir, dir, sizeof(dir), &page_bytes);
	if (page_bytes < (2u << 20))
		MGR_LOG(WARNING,
			"region on %s: %zu B pages, expect ~6x slower than hugetlbfs "
			"(run scripts/setup.sh)\n",
			dir, page_bytes);
	len = RTE_ALIGN_CEIL(len, page_bytes);
	table_off = RTE_ALIGN_CEIL(sizeof(struct sq_region_hdr), RTE_CACHE_LINE_SIZE);
	ready_off = RTE_ALIGN_CEIL(table_off + (size_t)max_nfs * sizeof(struct sq_nf_ctl),
				   RTE_CACHE_LINE_SIZE);
	/* the tx-ready bitmap, then the msg-ready one (region.h) */
	carve_off = RTE_ALIGN_CEIL(ready_off + 2 * sq_tx_ready_words(max_nfs) * sizeof(uint64_t),
				   page_bytes);
	if (carve_off + (16u << 20) > len) {
		MGR_LOG(ERR, "region of %u MiB is too small for %u NFs\n", mgr->cfg->region_mb,
			max_nfs);
		return -ENOSPC;
	}
	ret = map_file(mgr, dir, len);
	if (ret < 0)
		return ret;
	fill_header(mgr, len, max_nfs, table_off, ready_off);
	ret = init_carve(mgr, carve_off, len, page_bytes);
	if (ret < 0)
		goto out_unmap;
	ret = create_pool(mgr);
	if (ret < 0)
		goto out_unmap;
	MGR_LOG(INFO, "region %s: %zu MiB, %u mbufs, %u NF slots\n", mgr->region_path, len >> 20,
		mgr->cfg->mbufs, max_nfs);
	return 0;

out_unmap:
	mgr_region_destroy(mgr);
	return ret;
}

int
mgr_region_alloc_ring(struct mgr *mgr, const char *name, uint32_t slots, unsigned int flags,
		      struct rte_ring **out)
{
	ssize_t size = rte_ring_get_memsize(slots);
	struct rte_ring *r;
	int ret;

	if (size < 0)
		return (int)size;
	r = carve_alloc(&mgr->carve, (size_t)size, 0);
	if (r == NULL) {
		MGR_LOG(ERR, "no room in the region for ring %s (%u slots)\n", name, slots);
		return -ENOMEM;
	}
	ret = rte_ring_init(r, name, slots, flags);
	if (ret < 0) {
		carve_free(&mgr->carve, r, (size_t)size);
		return ret;
	}
	*out = r;
	return 0;
}

void
mgr_region_free_ring(struct mgr *mgr, struct rte_ring *r, uint32_t slots)
{
	ssize_t size = rte_ring_get_memsize(slots);

	if (r != NULL && size > 0 && carve_free(&mgr->carve, r, (size_t)size) < 0)
		MGR_LOG(ERR, "ring at %p (%u slots) is not one the region gave\n", (void *)r,
			slots);
}

void
mgr_region_destroy(struct mgr *mgr)
{
	if (mgr->pool != NULL) {
		mgr_guard_free();
		rte_mempool_free(mgr->pool);
		mgr->pool = NULL;
	}
	carve_fini(&mgr->carve);
	if (mgr->region != NULL) {
		munmap(mgr->region, mgr->region->len_bytes);
		mgr->region = NULL;
	}
	if (mgr->region_path[0] != '\0') {
		unlink(mgr->region_path);
		close(mgr->region_fd);
		mgr->region_path[0] = '\0';
	}
}

#define MGR_CORRUPT_KEY(e, k) [MGR_CORRUPT_##e] = k,
const char *const mgr_corrupt_keys[MGR_CORRUPT_MAX] = {MGR_FOREACH_CORRUPT(MGR_CORRUPT_KEY)};

/* The header's parts NFs only read: from its start to mgr_state, and from
 * its name to the per-core-group words NFs write. */
#define HDR_FIXED_A_LEN offsetof(struct sq_region_hdr, mgr_state)
#define HDR_FIXED_B_OFF offsetof(struct sq_region_hdr, name)
#define HDR_FIXED_B_LEN (offsetof(struct sq_region_hdr, woken) - HDR_FIXED_B_OFF)

void
mgr_region_set_state(struct mgr *mgr, enum sq_mgr_state state)
{
	mgr->mgr_state = state;
	atomic_store(&mgr->region->mgr_state, state);
	/* Running: every part of the header is written (the ports' names
	 * last); from now on the manager's copy is the header. */
	if (state == SQ_MGR_RUNNING && !mgr->hdr_sealed) {
		memcpy(&mgr->hdr_own, mgr->region, sizeof(mgr->hdr_own));
		mgr->hdr_sealed = true;
	}
}

/* A part of the header as the manager wrote it again, if an NF changed it. */
static void
restore_part(struct mgr *mgr, size_t off, size_t len)
{
	char *now = (char *)mgr->region + off;
	const char *own = (const char *)&mgr->hdr_own + off;

	if (memcmp(now, own, len) == 0)
		return;
	mgr->region_corrupt[MGR_CORRUPT_HEADER]++;
	memcpy(now, own, len);
}

/* NFs read mgr_state (informational: an NF leaves its loop on its own
 * ctl->stop, so one NF that rewrites this shared word stops no other) and the
 * manager never reads it back: it decides on its own copy. */
static void
check_hdr(struct mgr *mgr)
{
	struct sq_region_hdr *hdr = mgr->region;

	if (hdr->tx_ready_off != mgr->tx_ready_off) {
		mgr->region_corrupt[MGR_CORRUPT_TX_READY_OFF]++;
		hdr->tx_ready_off = mgr->tx_ready_off;
	}
	if (atomic_load_explicit(&hdr->mgr_state, memory_order_relaxed) != mgr->mgr_state) {
		mgr->region_corrupt[MGR_CORRUPT_MGR_STATE]++;
		atomic_store(&hdr->mgr_state, mgr->mgr_state);
	}
	if (mgr->hdr_sealed) {
		restore_part(mgr, 0, HDR_FIXED_A_LEN);
		restore_part(mgr, HDR_FIXED_B_OFF, HDR_FIXED_B_LEN);
	}
}

/* A ring's geometry as the manager made it: the manager's own end never
 * reads it (nfring.h); restored for the NF that uses the ring, which another
 * NF may have written over. */
static void
repair_ring(struct mgr *mgr, struct rte_ring *r, uint32_t mask)
{
	if (r->mask == mask && r->size == mask + 1 && r->capacity == mask)
		return;
	mgr->region_corrupt[MGR_CORRUPT_RING]++;
	r->mask = mask;
	r->size = mask + 1;
	r->capacity = mask;
}

/* The producer positions of an NF's rx ring, which only the manager moves:
 * an NF that set its tail back hides packets from itself, and the next
 * enqueue would write them again from ours (nfring.h); with no next
 * enqueue (no more traffic for it) they would stay hidden. Written from
 * ours here, and the NF woken to see them. */
static void
repair_rx_positions(struct mgr *mgr, struct mgr_nf *nf)
{
	struct rte_ring *r = nf->rx;
	bool moved;

	if (nf->ring_broken) /* killed for it; its rings start anew with the next process */
		return;
	if (mgr->rx_elsewhere)
		rte_spinlock_lock(&nf->rx_lock);
	moved = r->prod.tail != nf->rx_prod || r->prod.head != nf->rx_prod;
	if (moved) {
		__atomic_store_n(&r->prod.head, nf->rx_prod, __ATOMIC_RELAXED);
		__atomic_store_n(&r->prod.tail, nf->rx_prod, __ATOMIC_RELEASE);
	}
	if (mgr->rx_elsewhere)
		rte_spinlock_unlock(&nf->rx_lock);
	if (!moved)
		return;
	mgr->region_corrupt[MGR_CORRUPT_RING]++;
	if (nf->pid > 0)
		mgr_wakeup_force(mgr, nf);
}

/* An NF's ctl: the manager uses its own copies (struct mgr_nf, the config);
 * what it repairs here is for the NFs that read them and for the count.
 * The name is compared with the NF's own copy, not the running config's:
 * a service being removed is gone from the config before its NFs stop. */
static void
check_ctl(struct mgr *mgr, struct mgr_nf *nf)
{
	struct sq_nf_ctl *ctl = nf->ctl;

	/* Being set up (the control role writes its ctl), or stopped by the
	 * control role (its service removed or shrunk: the stop word is ours). */
	if (atomic_load_explicit(&nf->setting_up, memory_order_acquire) ||
	    atomic_load(&nf->retiring))
		return;
	if (ctl->core_group != nf->core_group) {
		mgr->region_corrupt[MGR_CORRUPT_CORE_GROUP]++;
		ctl->core_group = nf->core_group;
	}
	if (memchr(ctl->service, '\0', sizeof(ctl->service)) == NULL ||
	    strcmp(ctl->service, nf->name) != 0) {
		mgr->region_corrupt[MGR_CORRUPT_SERVICE]++;
		snprintf(ctl->service, sizeof(ctl->service), "%s", nf->name);
	}
	repair_ring(mgr, nf->rx, nf->rx_mask);
	repair_ring(mgr, nf->tx, nf->tx_mask);
	repair_rx_positions(mgr, nf);
	/* The manager sets stop only when it stops everything. */
	if (mgr->mgr_state != SQ_MGR_STOPPING &&
	    atomic_load_explicit(&ctl->stop, memory_order_relaxed) != 0) {
		mgr->region_corrupt[MGR_CORRUPT_STOP]++;
		atomic_store(&ctl->stop, 0);
	}
}

/* Every control period (10 ms): the header, and a slice of the NFs, so 10,000
 * NFs cost no more a round than a few dozen. */
#define CHECK_NFS_PER_CALL 64

void
mgr_region_check(struct mgr *mgr)
{
	if (mgr->region == NULL)
		return;
	check_hdr(mgr);
	for (uint32_t i = 0; i < CHECK_NFS_PER_CALL && i < mgr->n_nfs; i++) {
		if (mgr->region_check_next >= mgr->n_nfs)
			mgr->region_check_next = 0;
		check_ctl(mgr, &mgr->nfs[mgr->region_check_next++]);
	}
}

void __rte_noinline
mgr_region_ring_broken(struct mgr *mgr, struct mgr_nf *nf)
{
	mgr->region_corrupt[MGR_CORRUPT_RING]++;
	nf->ring_broken = true;
	MGR_LOG(WARNING, "%s#%u (pid %d) rewrote the positions of its rings; killing it\n",
		mgr->cfg->services[nf->service].name, nf->instance, nf->pid);
	if (nf->pid > 0)
		kill(nf->pid, SIGKILL);
}
