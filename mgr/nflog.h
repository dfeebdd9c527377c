/* SPDX-License-Identifier: BSD-3-Clause
 * nflog: what NFs write to stdout and stderr, read from a pipe per NF and
 * written to the manager's stderr a line at a time, each line behind the
 * NF's name ("fw#0: ..."), at most NFLOG_LINES_PER_S lines a second per
 * NF (the rest counted and said once a second). An NF gets no descriptor
 * of the manager's, its terminal included (mgr/spawn.c): this is its voice.
 *
 * No manager state: the caller (the control period of the main lcore)
 * says which slot, under which name, and what time it is.
 */
#ifndef SQUALL_MGR_NFLOG_H
#define SQUALL_MGR_NFLOG_H

#include <stdint.h>

/* Lines one NF may write a second before the rest are only counted. */
#define NFLOG_LINES_PER_S 100
/* A longer line is cut there (and the rest is a line of its own). */
#define NFLOG_LINE_BYTES  256

struct nflog_slot;

struct mgr_nflog {
	int epfd;
	int out_fd; /* where lines go: the manager's stderr */
	uint32_t n_slots;
	struct nflog_slot *slots;
};

/* @return 0, or -errno. */
int mgr_nflog_init(struct mgr_nflog *l, uint32_t n_slots, int out_fd);
void mgr_nflog_free(struct mgr_nflog *l);

/* A new pipe for slot @p slot, named @p name in its lines (what an earlier
 * process of the slot wrote is drained and said first). @return the write
 * end for the NF (close-on-exec: the caller closes it after the spawn), or
 * -errno. */
int mgr_nflog_open(struct mgr_nflog *l, uint32_t slot, const char *name);

/* Read what NFs wrote (at most a few KiB per NF a call, so no NF holds the
 * control period), @p now_ns a monotonic clock. */
void mgr_nflog_poll(struct mgr_nflog *l, uint64_t now_ns);

/* Everything still in every pipe, said (the manager's stop). */
void mgr_nflog_drain(struct mgr_nflog *l, uint64_t now_ns);

/* Lines of slot @p slot counted and not said, ever. */
uint64_t mgr_nflog_suppressed(const struct mgr_nflog *l, uint32_t slot);

#endif /* SQUALL_MGR_NFLOG_H */
