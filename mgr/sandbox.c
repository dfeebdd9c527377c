/* SPDX-License-Identifier: BSD-3-Clause
 * sandbox: the seccomp filters of sandboxed NFs (sandbox.h), built with
 * libseccomp and exported as BPF once, so that a spawning child (which may
 * not allocate: it runs on the manager's memory until execve) only loads one.
 *
 * Strict NFs get a deny list: a strict NF's own code (a crypto library, a
 * regex engine) makes system calls its author chose, and the filter must
 * stay right for every NF binary unchanged. What it denies is what reaches
 * beyond the NF: the network, other processes, children, the system, and
 * credentials.
 *
 * Isolated NFs, the untrusted ones, get an allow list: what the dynamic
 * loader and glibc's start make after execve, what libsquall's loop and the
 * shipped NFs make (found with strace -f on each under traffic, and the
 * loop's other paths: poll mode's sched_yield, a reload's file reads, a
 * log line, exit), and nothing else. In a sanitizer build the runtime makes
 * calls of its own (its shadow memory, /proc/self/maps, sigaltstack) that
 * vary with its version: there isolated NFs get the deny list.
 *
 * Every other NF (`sandbox: none`) gets the base filter, what no NF may do
 * whatever it is trusted with: type into a terminal (TIOCSTI, TIOCLINUX)
 * or pin itself to a core (sched_setaffinity: the manager places NFs);
 * both fail with EPERM there, and are in the strict and isolated filters
 * too.
 *
 * Either way a call the filter forbids kills the whole NF process (SIGSYS),
 * which the manager reports as the NF's last exit ("signal 31") and handles
 * by the service's restart policy. Another architecture's system calls (int
 * 0x80, x32) kill it too, or they would pass the list by other numbers.
 */
#include <errno.h>
#include <stdbool.h>
#include <linux/filter.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

#include <seccomp.h>

#include "sandbox.h"

static const char *const denied[] = {
	/* the network: an NF's packets come through its rings only */
	"socket",
	"socketpair",
	"accept",
	"accept4",
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

/* What an isolated NF may call, with no condition on the arguments. */
static const char *const allowed[] = {
	/* execve itself (the filter is loaded before it), then the dynamic
	 * loader and glibc's start: libraries opened, read and mapped */
	"execve",
	"brk",
	"arch_prctl",
	"access",
	"openat",
	"read",
	"pread64",
	"readlink",
	"close",
	"fstat",
	"newfstatat",
	"lseek",
	"mmap",
	"mprotect",
	"munmap",
	"set_tid_address",
	"set_robust_list",
	"rseq",
	"getrandom",
	"getpid",
	/* libsquall's loop: a sleeping NF waits on its futex word, a polling
	 * one yields; clock reads fall back from the vDSO to these */
	"futex",
	"sched_yield",
	"clock_gettime",
	"gettimeofday",
	"nanosleep",
	"clock_nanosleep",
	/* malloc growing and trimming */
	"madvise",
	"mremap",
	/* logs (stderr) */
	"write",
	"writev",
	/* the stop signal's handler, SIGHUP's reload */
	"rt_sigaction",
	"rt_sigprocmask",
	"rt_sigreturn",
	"restart_syscall",
	/* the end */
	"exit",
	"exit_group",
};

#define BASE      MGR_SANDBOX_BASE
#define STRICT    MGR_SANDBOX_STRICT
#define ISOLATED  MGR_SANDBOX_ISOLATED
#define N_FILTERS MGR_SANDBOX_N

/* Each kind twice: [1] also refuses huge pages of the NF's own. */
static struct sock_fprog filters[N_FILTERS][2];

/* A sanitizer build: its runtime's calls are not on the allow list. */
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

/* What no NF may do: the base filter's rules, in every filter. */
static int
add_base_rules(scmp_filter_ctx ctx, uint32_t action)
{
	static const unsigned long tty_writes[] = {TIOCSTI, TIOCLINUX};
	int ret = 0;

	for (size_t i = 0; i < sizeof(tty_writes) / sizeof(tty_writes[0]) && ret == 0; i++)
		ret = seccomp_rule_add(ctx, action, SCMP_SYS(ioctl), 1,
				       (struct scmp_arg_cmp){.arg = 1,
							     .op = SCMP_CMP_MASKED_EQ,
							     .datum_a = 0xffffffffu,
							     .datum_b = tty_writes[i]});
	if (ret == 0)
		ret = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(sched_setaffinity), 0);
	return ret;
}

static int
add_deny_rules(scmp_filter_ctx ctx)
{
	int ret = add_base_rules(ctx, SCMP_ACT_KILL_PROCESS);

	if (ret < 0)
		return ret;

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

/* An argument whose @p mask bits equal @p v. */
static struct scmp_arg_cmp
arg_masked(unsigned int arg, scmp_datum_t mask, scmp_datum_t v)
{
	return (struct scmp_arg_cmp){
		.arg = arg, .op = SCMP_CMP_MASKED_EQ, .datum_a = mask, .datum_b = v};
}

/* No huge pages of the NF's own (the region's are the manager's, charged to
 * it): a memory cgroup does not count them where no hugetlb controller is
 * (cgroup v1 without it), and memory_mb must bound what the NF takes. An
 * allow list (@p allow_list) lets mmap through only without MAP_HUGETLB;
 * the others refuse it, a huge memfd and huge SysV memory with EPERM. */
static int
add_nohuge_rules(scmp_filter_ctx ctx, bool allow_list)
{
	int ret;

	if (allow_list)
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1,
					arg_masked(3, MAP_HUGETLB, 0));
	ret = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(mmap), 1,
			       arg_masked(3, MAP_HUGETLB, MAP_HUGETLB));
	if (ret == 0)
		ret = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(memfd_create), 1,
				       arg_masked(1, MFD_HUGETLB, MFD_HUGETLB));
	if (ret == 0)
		ret = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(shmget), 1,
				       arg_masked(2, SHM_HUGETLB, SHM_HUGETLB));
	return ret;
}

/* An argument that must equal @p v. libseccomp's SCMP_A0(op, v) leaves
 * datum_b out, which clang's -Wmissing-field-initializers refuses. */
static struct scmp_arg_cmp
arg_eq(unsigned int arg, scmp_datum_t v)
{
	return (struct scmp_arg_cmp){.arg = arg, .op = SCMP_CMP_EQ, .datum_a = v, .datum_b = 0};
}

static int
add_allow_rules(scmp_filter_ctx ctx, bool nohuge)
{
	int ret = 0;

	for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]) && ret == 0; i++) {
		int nr = seccomp_syscall_resolve_name(allowed[i]);

		if (nr == __NR_SCMP_ERROR || (nohuge && nr == SCMP_SYS(mmap)))
			continue; /* not on this architecture; or below */
		ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
	}
	if (ret == 0 && nohuge)
		ret = add_nohuge_rules(ctx, true);
	/* Calls with an argument that must be one thing. libsquall sets its
	 * parent-death signal; glibc reads its own stack limit; stdio asks
	 * whether a stream is a terminal before it buffers it. */
	if (ret == 0)
		ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 1,
				       arg_eq(0, PR_SET_PDEATHSIG));
	if (ret == 0)
		ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), 1, arg_eq(0, 0));
	if (ret == 0)
		ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1, arg_eq(1, TCGETS));
	return ret;
}

/* The BPF program, read back from a memory file libseccomp wrote it to. */
static int export(scmp_filter_ctx ctx, struct sock_fprog *filter)
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
		filter->filter = malloc((size_t)st.st_size);
		if (filter->filter == NULL)
			ret = -ENOMEM;
		else if (pread(fd, filter->filter, (size_t)st.st_size, 0) != st.st_size)
			ret = -EIO;
		else
			filter->len = (unsigned short)(st.st_size / sizeof(struct sock_filter));
	}
	close(fd);
	return ret;
}

/* One filter: BASE, everything allowed but what add_base_rules refuses;
 * STRICT, everything but what add_deny_rules kills; ISOLATED, everything
 * killed but what add_allow_rules allows. */
static int
build(struct sock_fprog *filter, enum mgr_sandbox_kind kind, bool nohuge)
{
	scmp_filter_ctx ctx;
	int ret;

	ctx = seccomp_init(kind == ISOLATED ? SCMP_ACT_KILL_PROCESS : SCMP_ACT_ALLOW);
	if (ctx == NULL)
		return -ENOMEM;
	ret = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	if (ret == 0)
		ret = kind == BASE     ? add_base_rules(ctx, SCMP_ACT_ERRNO(EPERM))
		      : kind == STRICT ? add_deny_rules(ctx)
				       : add_allow_rules(ctx, nohuge);
	if (ret == 0 && nohuge && kind != ISOLATED)
		ret = add_nohuge_rules(ctx, false);
	if (ret == 0)
		ret = export(ctx, filter);
	seccomp_release(ctx);
	return ret;
}

int
mgr_sandbox_init(void)
{
	int ret;

	if (filters[STRICT][0].filter != NULL)
		return 0;
	ret = 0;
	for (int h = 0; h < 2 && ret == 0; h++) {
		ret = build(&filters[BASE][h], BASE, h);
		if (ret == 0)
			ret = build(&filters[STRICT][h], STRICT, h);
		if (ret == 0)
			ret = build(&filters[ISOLATED][h], SANITIZED ? STRICT : ISOLATED, h);
	}
	if (ret != 0)
		mgr_sandbox_free();
	return ret;
}

void
mgr_sandbox_free(void)
{
	for (int i = 0; i < N_FILTERS; i++) {
		for (int h = 0; h < 2; h++) {
			free(filters[i][h].filter);
			filters[i][h].filter = NULL;
			filters[i][h].len = 0;
		}
	}
}

const struct sock_fprog *
mgr_sandbox_filter(enum mgr_sandbox_kind kind, bool nohuge)
{
	const struct sock_fprog *f = &filters[kind < N_FILTERS ? kind : STRICT][nohuge];

	return f->filter != NULL ? f : NULL;
}
