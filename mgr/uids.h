/* SPDX-License-Identifier: BSD-3-Clause
 * uids: every NF its own uid, from a range that is this manager's alone, so
 * that kill(), /proc/<pid>/mem and ptrace from one NF reach no other NF, of
 * this manager or another's (docs/nf-api.md, the threat model).
 *
 * Range k (0 <= k < MGR_UIDS_RANGES) is the uids MGR_UIDS_FIRST +
 * k * MGR_UIDS_SPAN up to the next range, NF slot i its base + i. A
 * manager holds its range by an exclusive flock on <lock_dir>/<k> for as
 * long as it runs (the kernel lets go when it dies, however it dies), and
 * takes none that a user of the system's password database falls in.
 * No manager state: the caller keeps the struct.
 */
#ifndef SQUALL_MGR_UIDS_H
#define SQUALL_MGR_UIDS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MGR_UIDS_FIRST    0x5a000000u
#define MGR_UIDS_SPAN     (1u << 20) /* >= the most NF slots a config may ask for */
#define MGR_UIDS_RANGES   64u
#define MGR_UIDS_LOCK_DIR "/run/squall/uids"

struct mgr_uids {
	int index; /* the range held; -1: none */
	uid_t base;
	int lock_fd;
};

/* Claim the first free range under @p lock_dir. @return 0, or -errno with
 * the reason in @p err. */
int mgr_uids_claim(struct mgr_uids *u, const char *lock_dir, char *err, size_t err_len);
void mgr_uids_release(struct mgr_uids *u);

/* The uid of NF slot @p slot (< MGR_UIDS_SPAN). */
static inline uid_t
mgr_uids_of(const struct mgr_uids *u, uint32_t slot)
{
	return u->base + slot;
}

#endif /* SQUALL_MGR_UIDS_H */
