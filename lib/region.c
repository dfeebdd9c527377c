/* SPDX-License-Identifier: BSD-3-Clause
 * Attach to the manager's shared region: read the header, check it, map the
 * whole file at the address the manager used.
 */
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <squall/log.h>
#include <squall/region.h>

#include "region.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

/* Check the header before mapping, so a wrong file never lands on a fixed
 * address and a wrong ABI is reported in words, not as a crash. */
static int
check_hdr(const char *path, const struct sq_region_hdr *hdr)
{
	if (hdr->magic != SQ_REGION_MAGIC) {
		SQ_LOG(ERR, NF, "%s: not a Squall region (bad magic)\n", path);
		return -EPROTO;
	}
	if (hdr->abi_version != SQ_ABI_VERSION) {
		SQ_LOG(ERR, NF, "%s: region ABI %u, this NF was built for ABI %u; rebuild it\n",
		       path, hdr->abi_version, SQ_ABI_VERSION);
		return -EPROTO;
	}
	if (hdr->base_addr == 0 || hdr->len_bytes < sizeof(*hdr)) {
		SQ_LOG(ERR, NF, "%s: corrupt region header\n", path);
		return -EPROTO;
	}
	return 0;
}

int
sq_region_map_fd(int fd, const char *path, struct sq_region_hdr **out)
{
	struct sq_region_hdr hdr;
	void *addr;
	ssize_t n;
	int ret;

	/* Magic and ABI first: a header of another ABI may have another size. */
	memset(&hdr, 0, sizeof(hdr));
	n = pread(fd, &hdr, sizeof(hdr), 0);
	if (n < (ssize_t)(offsetof(struct sq_region_hdr, abi_version) + sizeof(hdr.abi_version))) {
		SQ_LOG(ERR, NF, "%s: not a Squall region (shorter than its header)\n", path);
		ret = -EPROTO;
		goto out_close;
	}
	ret = check_hdr(path, &hdr);
	if (ret < 0)
		goto out_close;
	if (n != (ssize_t)sizeof(hdr)) {
		SQ_LOG(ERR, NF, "%s: not a Squall region (shorter than its header)\n", path);
		ret = -EPROTO;
		goto out_close;
	}

	/* No MAP_POPULATE: the NF touches only its rings and the mbufs it is
	 * given, so its page tables stay small. */
	addr = mmap((void *)(uintptr_t)hdr.base_addr, hdr.len_bytes, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
	if (addr == MAP_FAILED) {
		ret = -errno;
		SQ_LOG(ERR, NF, "%s: cannot map region at %#" PRIx64 ": %s\n", path, hdr.base_addr,
		       strerror(errno));
		goto out_close;
	}
	if ((uintptr_t)addr != hdr.base_addr) {
		/* Kernels before 4.17 ignore MAP_FIXED_NOREPLACE. */
		munmap(addr, hdr.len_bytes);
		SQ_LOG(ERR, NF, "%s: region address %#" PRIx64 " is taken\n", path, hdr.base_addr);
		ret = -EEXIST;
		goto out_close;
	}
	*out = addr;
	ret = 0;
out_close:
	return ret;
}

/* The manager's attach socket (mgr/attach.c): the region's fd if the
 * manager allows this process's uid, else its refusal, said. */
static int
fd_from_socket(const char *path, pid_t *mgr_pid)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char text[200], ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {.iov_base = text, .iov_len = sizeof(text) - 1};
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = ctl,
			     .msg_controllen = sizeof(ctl)};
	struct cmsghdr *c;
	ssize_t n;
	int s, fd = -ECONNREFUSED;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	/* (the manager answers within its control period: a few ms) */
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &(struct timeval){.tv_sec = 5},
		   sizeof(struct timeval));
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		fd = -errno;
		SQ_LOG(ERR, NF, "%s: cannot reach the manager: %s\n", path, strerror(errno));
		close(s);
		return fd;
	}
	n = recvmsg(s, &msg, MSG_CMSG_CLOEXEC);
	{
		struct ucred cred;
		socklen_t len = sizeof(cred);

		if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
			*mgr_pid = cred.pid;
	}
	close(s);
	if (n <= 0) {
		SQ_LOG(ERR, NF, "%s: no answer from the manager\n", path);
		return -ECONNRESET;
	}
	text[n] = '\0';
	for (c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			memcpy(&fd, CMSG_DATA(c), sizeof(int));
	if (strcmp(text, "ok") != 0 || fd < 0) {
		SQ_LOG(ERR, NF, "%s: %s\n", path, text);
		if (fd >= 0)
			close(fd);
		return -EACCES;
	}
	return fd;
}

int
sq_region_map(const char *path, struct sq_region_hdr **out, pid_t *mgr_pid)
{
	struct stat st;
	int fd, ret;

	if (stat(path, &st) == 0 && S_ISSOCK(st.st_mode)) {
		fd = fd_from_socket(path, mgr_pid);
		if (fd < 0)
			return fd;
		ret = sq_region_map_fd(fd, path, out);
		close(fd);
		return ret;
	}
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		SQ_LOG(ERR, NF, "%s: cannot open region: %s\n", path, strerror(errno));
		return ret;
	}
	ret = sq_region_map_fd(fd, path, out);
	close(fd);
	return ret;
}

void
sq_region_unmap(struct sq_region_hdr *hdr)
{
	munmap(hdr, hdr->len_bytes);
}
