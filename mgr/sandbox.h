/* SPDX-License-Identifier: BSD-3-Clause
 * sandbox: what an NF of a `sandbox: strict` service is held to besides
 * manager.nf_user (docs/nf-api.md "Sandbox"): a uid of its own, so no other
 * NF can signal, ptrace or read it, and a seccomp filter (libseccomp) that
 * kills it on a system call that reaches beyond it (strict: a deny list)
 * or on any its loop has no use for (isolated: an allow list). No manager
 * state: the filters are built once, before any NF starts.
 */
#ifndef SQUALL_MGR_SANDBOX_H
#define SQUALL_MGR_SANDBOX_H

#include <stdbool.h>
#include <stdint.h>

struct sock_fprog;

/* The uid of the strict NF in slot @p nf_id: above every uid a system
 * gives its users, one per slot, and the group stays manager.nf_user's so
 * that files shared with NFs stay readable by group. */
#define SQ_SANDBOX_UID_BASE 0x5a000000u

/* Build both filters. @return 0, or -errno (libseccomp's). */
int mgr_sandbox_init(void);
void mgr_sandbox_free(void);

/* The filter a strict (or, @p isolated, an isolated) NF's process loads
 * before execve. */
const struct sock_fprog *mgr_sandbox_filter(bool isolated);

#endif /* SQUALL_MGR_SANDBOX_H */
