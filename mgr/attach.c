/* SPDX-License-Identifier: BSD-3-Clause
 * attach: the region's fd for NFs started by hand, by uid.
 *
 * A spawned NF inherits the region's fd. An NF started by hand used to open
 * /dev/shm/squall-NAME.region, a symlink into the manager's /proc, which
 * only root or the manager's user can follow: so it ran as root. Here it
 * runs as any user the config names in manager.attach_users: it connects to
 * the attach socket, the kernel tells the manager its uid (SO_PEERCRED:
 * what the process is, not what it says), and the manager answers with the
 * fd (SCM_RIGHTS) or with why not. A SOCK_SEQPACKET socket: one answer, one
 * message, never a partial read.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rte_log.h>

#include "attach.h"

extern int sq_logtype_mgr;
#define ATTACH_LOG(level, fmt, ...) \
	rte_log(RTE_LOG_##level, sq_logtype_mgr, "squall-mgr: " fmt, ##__VA_ARGS__)

#define ACCEPTS_PER_POLL 8

int
mgr_attach_open(struct mgr_attach *a, const char *name, int region_fd, const uint32_t *uids,
		uint16_t n_uids)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, e;

	*a = (struct mgr_attach){
		.listen_fd = -1, .region_fd = region_fd, .uids = uids, .n_uids = n_uids};
	if (snprintf(a->path, sizeof(a->path), SQ_ATTACH_DIR "/squall-%s.attach", name) >=
	    (int)sizeof(a->path))
		return -ENAMETOOLONG;
	if (mkdir(SQ_ATTACH_DIR, 0755) < 0 && errno != EEXIST) {
		e = errno;
		ATTACH_LOG(WARNING, "%s: %s: NFs started by hand cannot attach\n", SQ_ATTACH_DIR,
			   strerror(e));
		return -e;
	}
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* a socket left by a manager of this name that died (two of one name
	 * were refused at the region already) */
	unlink(a->path);
	memcpy(sa.sun_path, a->path, sizeof(a->path));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(a->path, 0666) < 0 ||
	    listen(fd, 16) < 0) {
		e = errno;
		ATTACH_LOG(WARNING, "%s: %s: NFs started by hand cannot attach\n", a->path,
			   strerror(e));
		close(fd);
		unlink(a->path);
		return -e;
	}
	a->listen_fd = fd;
	return 0;
}

static bool
allowed(const struct mgr_attach *a, uid_t uid)
{
	if (uid == 0 || uid == geteuid())
		return true;
	for (uint16_t i = 0; i < a->n_uids; i++)
		if (a->uids[i] == uid)
			return true;
	return false;
}

/* "ok" with the region's fd, or the refusal in words. */
static void
answer(struct mgr_attach *a, int conn)
{
	char ctl[CMSG_SPACE(sizeof(int))] = {0}, text[160];
	struct ucred cred = {0};
	socklen_t len = sizeof(cred);
	struct iovec iov = {.iov_base = text};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	bool ok;

	ok = getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && allowed(a, cred.uid);
	if (ok) {
		struct cmsghdr *c;

		snprintf(text, sizeof(text), "ok");
		msg.msg_control = ctl;
		msg.msg_controllen = sizeof(ctl);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &a->region_fd, sizeof(int));
	} else {
		snprintf(text, sizeof(text),
			 "refused: uid %u may not attach (manager.attach_users)",
			 (unsigned int)cred.uid);
	}
	iov.iov_len = strlen(text);
	if (sendmsg(conn, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		ok = false;
	if (ok) {
		a->granted++;
		ATTACH_LOG(NOTICE, "region given to pid %d (uid %u), an NF started by hand\n",
			   (int)cred.pid, (unsigned int)cred.uid);
	} else {
		a->refused++;
		ATTACH_LOG(WARNING, "attach refused to pid %d (uid %u)\n", (int)cred.pid,
			   (unsigned int)cred.uid);
	}
}

void
mgr_attach_poll(struct mgr_attach *a)
{
	for (int i = 0; a->listen_fd >= 0 && i < ACCEPTS_PER_POLL; i++) {
		int conn = accept4(a->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (conn < 0)
			return;
		answer(a, conn);
		close(conn);
	}
}

void
mgr_attach_close(struct mgr_attach *a)
{
	if (a->listen_fd < 0)
		return;
	close(a->listen_fd);
	a->listen_fd = -1;
	unlink(a->path);
}
