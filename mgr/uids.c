/* SPDX-License-Identifier: BSD-3-Clause
 * uids: a range of NF uids per manager, held by a lock file (uids.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "uids.h"

/* mkdir -p, root's only. */
static int
make_dir(const char *path)
{
	char p[256];

	if (snprintf(p, sizeof(p), "%s", path) >= (int)sizeof(p))
		return -ENAMETOOLONG;
	for (char *s = p + 1; *s != '\0'; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	if (mkdir(p, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* A user of the password database with a uid in [first, first + span). */
static bool
range_has_user(uid_t first, uint32_t span, char *who, size_t who_len)
{
	struct passwd *pw;
	bool found = false;

	setpwent();
	while (!found && (pw = getpwent()) != NULL) {
		if (pw->pw_uid >= first && pw->pw_uid - first < span) {
			snprintf(who, who_len, "%s (uid %u)", pw->pw_name,
				 (unsigned int)pw->pw_uid);
			found = true;
		}
	}
	endpwent();
	return found;
}

int
mgr_uids_claim(struct mgr_uids *u, const char *lock_dir, char *err, size_t err_len)
{
	char path[300], who[128] = "";
	int ret;

	*u = (struct mgr_uids){.index = -1, .lock_fd = -1};
	ret = make_dir(lock_dir);
	if (ret < 0) {
		snprintf(err, err_len, "cannot make %s: %s", lock_dir, strerror(-ret));
		return ret;
	}
	for (uint32_t k = 0; k < MGR_UIDS_RANGES; k++) {
		uid_t base = MGR_UIDS_FIRST + k * MGR_UIDS_SPAN;
		int fd;

		snprintf(path, sizeof(path), "%s/%u", lock_dir, k);
		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0) {
			ret = -errno;
			snprintf(err, err_len, "cannot open %s: %s", path, strerror(errno));
			return ret;
		}
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			close(fd); /* another manager's */
			continue;
		}
		if (range_has_user(base, MGR_UIDS_SPAN, who, sizeof(who))) {
			close(fd); /* (said below if no range is left) */
			continue;
		}
		*u = (struct mgr_uids){.index = (int)k, .base = base, .lock_fd = fd};
		return 0;
	}
	snprintf(err, err_len, "no free range of NF uids: %u managers run%s%s (lock files in %s)",
		 MGR_UIDS_RANGES, who[0] ? ", or a user holds one: " : "", who, lock_dir);
	return -EBUSY;
}

void
mgr_uids_release(struct mgr_uids *u)
{
	if (u->lock_fd >= 0)
		close(u->lock_fd);
	*u = (struct mgr_uids){.index = -1, .lock_fd = -1};
}
