/* SPDX-License-Identifier: BSD-3-Clause
 * sandbox: what an NF of a `sandbox: strict` service is held to besides its
 * own uid (uids.h) and descriptors (spawn.h) (docs/nf-api.md "Sandbox"): no
 * core dump, and a seccomp filter (libseccomp) that
 * kills it on a system call that reaches beyond it (strict: a deny list)
 * or on any its loop has no use for (isolated: an allow list). No manager
 * state: the filters are built once, before any NF starts.
 */
#ifndef SQUALL_MGR_SANDBOX_H
#define SQUALL_MGR_SANDBOX_H

#include <stdbool.h>
#include <stdint.h>

struct sock_fprog;

/* Build the filters. @return 0, or -errno (libseccomp's). */
int mgr_sandbox_init(void);
void mgr_sandbox_free(void);

/* The filters: what no NF may do (`sandbox: none`), strict's deny list,
 * isolated's allow list. */
enum mgr_sandbox_kind { MGR_SANDBOX_BASE, MGR_SANDBOX_STRICT, MGR_SANDBOX_ISOLATED, MGR_SANDBOX_N };

/* The filter an NF of @p kind loads before execve, or NULL before
 * mgr_sandbox_init; @p nohuge: one that refuses huge pages of its own
 * (MAP_HUGETLB, MFD_HUGETLB, SHM_HUGETLB), which no memory limit counts
 * where there is no hugetlb controller. */
const struct sock_fprog *mgr_sandbox_filter(enum mgr_sandbox_kind kind, bool nohuge);

#endif /* SQUALL_MGR_SANDBOX_H */
