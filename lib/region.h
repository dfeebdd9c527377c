/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef SQUALL_LIB_REGION_H
#define SQUALL_LIB_REGION_H

#include <inttypes.h>
#include <string.h>
#include <sys/types.h>

#include <squall/region.h>

/** Map the region file at its recorded address; a path that is the
 * manager's attach socket sets *mgr_pid to the manager's pid as the kernel
 * says it (SO_PEERCRED). @return 0 or -errno. */
int sq_region_map(const char *path, struct sq_region_hdr **out, pid_t *mgr_pid);
/** The same from an open fd (path names it in messages); fd stays open. */
int sq_region_map_fd(int fd, const char *path, struct sq_region_hdr **out);
void sq_region_unmap(struct sq_region_hdr *hdr);

#endif
