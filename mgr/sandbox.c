/* SPDX-License-Identifier: BSD-3-Clause
 * sandbox: the seccomp filter of strict NFs (sandbox.h), built with
 * libseccomp and exported as BPF once, so that a spawning child (which may
 * not allocate: it runs on the manager's memory until execve) only loads it.
 *
 * A deny list, not an allow list: an NF's own code (a crypto library, a
 * regex engine) makes system calls its author chose, and the filter must
 * stay right for every NF binary unchanged. What it denies is what reaches
 * beyond the NF: the network, other processes, children, the system, and
 * credentials. Each kills the whole NF process (SIGSYS), which the manager
 * reports as the NF's last exit ("signal 31") and handles by the service's
 * restart policy. Another architecture's system calls (int 0x80, x32) kill
 * it too, or they would pass the list by other numbers.
 */
#include <errno.h>
#include <linux/filter.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <seccomp.h>

#include "sandbox.h"

static const char *const denied[] = {
	/* the network: an NF's packets come through its rings only */
	"socket",
	"socketpair",
	/* other processes */
	"ptrace",
	"process_vm_readv",
	"process_vm_writev",
	"kcmp",
	"pidfd_open",
	"pidfd_getfd",
	"pidfd_send_signal",
	/* children (threads stay allowed: clone with CLONE_THREAD, below) */
	"fork",
	"vfork",
	/* the system */
	"mount",
	"umount2",
	"pivot_root",
	"chroot",
	"unshare",
	"setns",
	"swapon",
	"swapoff",
	"reboot",
	"kexec_load",
	"kexec_file_load",
	"init_module",
	"finit_module",
	"delete_module",
	"bpf",
	"perf_event_open",
	"userfaultfd",
	"keyctl",
	"add_key",
	"request_key",
	"io_uring_setup",
	"io_uring_enter",
	"io_uring_register",
	"open_by_handle_at",
	"name_to_handle_at",
	"acct",
	"quotactl",
	"settimeofday",
	"clock_settime",
	"clock_adjtime",
	"adjtimex",
	"syslog",
	"iopl",
	"ioperm",
	"vhangup",
	"sethostname",
	"setdomainname",
	/* credentials (without capabilities they would fail; a try is hostile) */
	"setuid",
	"setgid",
	"setreuid",
	"setregid",
	"setresuid",
	"setresgid",
	"setgroups",
	"setfsuid",
	"setfsgid",
	"capset",
};

static struct sock_fprog filter;

static int
add_rules(scmp_filter_ctx ctx)
{
	int ret;

	for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++) {
		int nr = seccomp_syscall_resolve_name(denied[i]);

		if (nr == __NR_SCMP_ERROR)
			continue; /* not on this architecture */
		ret = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, nr, 0);
		if (ret < 0)
			return ret;
	}
	/* clone makes a child unless it makes a thread of this process. */
	ret = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, SCMP_SYS(clone), 1,
			       SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
	/* clone3's flags are in memory a filter cannot read: refused, and
	 * glibc's pthread_create falls back to clone. */
	if (ret == 0)
		ret = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	return ret;
}

/* The BPF program, read back from a memory file libseccomp wrote it to. */
static int export(scmp_filter_ctx ctx)
{
	struct stat st;
	int fd, ret;

	fd = memfd_create("squall-seccomp", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret = seccomp_export_bpf(ctx, fd);
	if (ret == 0 && fstat(fd, &st) < 0)
		ret = -errno;
	if (ret == 0 && (st.st_size == 0 || st.st_size % sizeof(struct sock_filter) != 0))
		ret = -EINVAL;
	if (ret == 0) {
		filter.filter = malloc((size_t)st.st_size);
		if (filter.filter == NULL)
			ret = -ENOMEM;
		else if (pread(fd, filter.filter, (size_t)st.st_size, 0) != st.st_size)
			ret = -EIO;
		else
			filter.len = (unsigned short)(st.st_size / sizeof(struct sock_filter));
	}
	close(fd);
	return ret;
}

int
mgr_sandbox_init(void)
{
	scmp_filter_ctx ctx;
	int ret;

	if (filter.filter != NULL)
		return 0;
	ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (ctx == NULL)
		return -ENOMEM;
	ret = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	if (ret == 0)
		ret = add_rules(ctx);
	if (ret == 0)
		ret = export(ctx);
	seccomp_release(ctx);
	if (ret != 0)
		mgr_sandbox_free();
	return ret;
}

void
mgr_sandbox_free(void)
{
	free(filter.filter);
	filter.filter = NULL;
	filter.len = 0;
}

const struct sock_fprog *
mgr_sandbox_filter(void)
{
	return filter.filter != NULL ? &filter : NULL;
}
