/* SPDX-License-Identifier: BSD-3-Clause
 * attach: an NF started by hand asks for the region over a unix socket, and
 * gets its file descriptor if its uid is one the config allows (issue 16:
 * "an NF started by hand attaches only if the manager allows its uid").
 * No manager state: the caller gives the region's fd and the uids.
 */
#ifndef SQUALL_MGR_ATTACH_H
#define SQUALL_MGR_ATTACH_H

#include <stdint.h>
#include <sys/un.h>

/* Where the socket is: root's directory, not world-writable /dev/shm, so
 * that no other user can put a socket of theirs at the path first. */
#define SQ_ATTACH_DIR "/run/squall"

struct mgr_attach {
	int listen_fd; /* -1: no socket (not root, or it could not be made) */
	int region_fd;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	const uint32_t *uids;
	uint16_t n_uids;
	uint64_t granted, refused;
};

/* Listen at SQ_ATTACH_DIR/squall-NAME.attach (any local user may connect:
 * the answer to one not allowed is a refusal that says why).
 * @return 0, or -errno (logged; the manager runs without it). */
int mgr_attach_open(struct mgr_attach *a, const char *name, int region_fd, const uint32_t *uids,
		    uint16_t n_uids);

/* Answer the NFs waiting to attach, a few per call; never blocks. */
void mgr_attach_poll(struct mgr_attach *a);

void mgr_attach_close(struct mgr_attach *a);

#endif /* SQUALL_MGR_ATTACH_H */
