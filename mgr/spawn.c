/* SPDX-License-Identifier: BSD-3-Clause
 * spawn: an NF process started as posix_spawn does (a child that shares the
 * manager's memory until execve, so a manager with large mappings copies no
 * page tables), with the credential steps posix_spawn has no attribute for.
 *
 * Until execve the child runs on the manager's memory with the manager's
 * threads still running: it calls no allocator and no glibc function that
 * takes a lock or acts on every thread. Credentials are changed by raw
 * system calls, as glibc's setresuid() would change those of every thread
 * of the process it believes it is in: the manager's.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <linux/close_range.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spawn.h"

#define STACK_BYTES (64 * 1024)

struct child {
	const struct mgr_spawn *s;
	sigset_t mask; /* the caller's, the NF's from execve on */
	int err;       /* errno of the failed step; 0 if execve ran */
	const char *step;
};

static int
child_fail(struct child *c, const char *step)
{
	c->err = errno;
	c->step = step;
	_exit(127);
}

/* Drop what root has, in the order that leaves no window: the bounding set
 * while CAP_SETPCAP is still held, then groups and gid while CAP_SETGID is,
 * then the uid, which clears the permitted and effective sets. */
static int
drop_privileges(struct child *c)
{
	const struct mgr_spawn *s = c->s;

	/* (EINVAL: past the kernel's last capability) */
	for (long cap = 0; prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0 || errno != EINVAL; cap++)
		;
	if (syscall(SYS_setgroups, 0, NULL) < 0)
		return child_fail(c, "setgroups");
	if (syscall(SYS_setresgid, s->gid, s->gid, s->gid) < 0)
		return child_fail(c, "setresgid");
	if (syscall(SYS_setresuid, s->uid, s->uid, s->uid) < 0)
		return child_fail(c, "setresuid");
	return 0;
}

/* Paths that lead to the manager's memory or files: covered, in the NF's
 * own mount namespace, by an empty read-only tmpfs. */
static const char *const hidden_dirs[] = {"/dev/shm", "/dev/hugepages", "/run/dpdk"};

/* In the namespaces clone made: mounts private first (nothing propagates to
 * the host's), then a /proc that shows the NF's pid namespace only (not the
 * manager's /proc/<pid>/fd), then the hidden directories. Root still. */
static int
hide_fs(struct child *c)
{
	const unsigned long flags = MS_NOSUID | MS_NODEV | MS_NOEXEC;

	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return child_fail(c, "mount_private");
	if (mount("proc", "/proc", "proc", flags, NULL) < 0)
		return child_fail(c, "mount_proc");
	for (size_t i = 0; i < sizeof(hidden_dirs) / sizeof(hidden_dirs[0]); i++)
		if (mount("none", hidden_dirs[i], "tmpfs", flags | MS_RDONLY, "size=4k,mode=0555") <
			    0 &&
		    errno != ENOENT)
			return child_fail(c, "mount_hide");
	return 0;
}

/* Move @p fd to at least MGR_SPAWN_FD_FIRST, so that the moves to the fixed
 * numbers below cannot overwrite one another's source. */
static int
lift(struct child *c, int fd)
{
	int to = fcntl(fd, F_DUPFD_CLOEXEC, MGR_SPAWN_FD_FIRST);

	return to >= 0 ? to : child_fail(c, "fd");
}

/* What the NF is given, at fixed numbers: 0 /dev/null, 1 and 2 its log
 * pipe, MGR_SPAWN_REGION_FD its region; every other descriptor of the
 * manager's (EAL's memory files, sockets, ports' files, the telemetry
 * listener, pipes) closed, close-on-exec or not.
 *
 * The child shares the manager's descriptor table until here (CLONE_FILES):
 * a copy of the whole table would cost a manager with a log pipe per NF
 * (10,000 NFs: 10,000 descriptors) that much per start. The copy the kernel
 * makes now holds only the descriptors below the highest it is given (the
 * caller keeps those low), and the rest are closed in it. */
static int
keep_only_own_fds(struct child *c)
{
	const struct mgr_spawn *s = c->s;
	int top = s->stdin_fd > s->log_fd ? s->stdin_fd : s->log_fd;
	int in, log, region;

	if (s->keep_fd > top)
		top = s->keep_fd;
	if (syscall(SYS_close_range, (unsigned int)top + 1, ~0u, CLOSE_RANGE_UNSHARE) < 0)
		return child_fail(c, "close_range");
	in = lift(c, s->stdin_fd);
	log = lift(c, s->log_fd);
	region = s->keep_fd >= 0 ? lift(c, s->keep_fd) : -1;

	if (dup2(in, STDIN_FILENO) < 0 || dup2(log, STDOUT_FILENO) < 0 ||
	    dup2(log, STDERR_FILENO) < 0)
		return child_fail(c, "stdio");
	if (region >= 0 && dup2(region, MGR_SPAWN_REGION_FD) < 0)
		return child_fail(c, "region_fd");
	if (syscall(SYS_close_range, region >= 0 ? MGR_SPAWN_REGION_FD + 1 : MGR_SPAWN_REGION_FD,
		    ~0u, 0) < 0)
		return child_fail(c, "close_range");
	return 0;
}

/* No controlling terminal: TIOCSTI on a terminal that is not the caller's
 * controlling one is refused (without CAP_SYS_ADMIN, which the NF drops),
 * and /dev/tty opens nothing. TIOCNOTTY by a process that leads no session
 * detaches that process alone. */
static void
drop_terminal(struct child *c)
{
	int fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);

	(void)c;
	if (fd < 0)
		return; /* (none: ENXIO) */
	ioctl(fd, TIOCNOTTY);
	close(fd);
}

static int
child_main(void *arg)
{
	struct child *c = arg;
	const struct mgr_spawn *s = c->s;
	const struct sigaction dfl = {.sa_handler = SIG_DFL};

	/* A manager handler run here would act on the manager's memory. Ignored
	 * signals stay ignored, as with posix_spawn. */
	for (int sig = 1; sig < _NSIG; sig++) {
		struct sigaction old;

		if (sigaction(sig, NULL, &old) == 0 && old.sa_handler != SIG_IGN &&
		    old.sa_handler != SIG_DFL)
			sigaction(sig, &dfl, NULL);
	}
	/* Own process group: a Ctrl-C at the terminal reaches the manager
	 * only, which then stops its NFs in order. (Not a session of its own:
	 * with the scheduler's autogroups, each session is a group of its own
	 * that the NFs' nice values do not rank against each other.) */
	if (setpgid(0, 0) < 0)
		return child_fail(c, "setpgid");
	/* Its service's cgroups before anything it allocates: "0" is the
	 * writer, whatever pid it has in its own pid namespace. (Writes: the
	 * descriptor table, still the manager's, is not changed.) */
	for (unsigned int i = 0; i < s->n_cgroup_fds; i++)
		if (s->cgroup_fds[i] >= 0 && write(s->cgroup_fds[i], "0", 1) < 0)
			return child_fail(c, "cgroup");
	/* (before RLIMIT_NOFILE: the moves go through high numbers) */
	keep_only_own_fds(c);
	drop_terminal(c);
	if (s->no_core && setrlimit(RLIMIT_CORE, &(struct rlimit){0, 0}) < 0)
		return child_fail(c, "rlimit_core");
	if (s->data_bytes != 0 &&
	    setrlimit(RLIMIT_DATA, &(struct rlimit){s->data_bytes, s->data_bytes}) < 0)
		return child_fail(c, "rlimit_data");
	if (s->max_fds != 0 &&
	    setrlimit(RLIMIT_NOFILE, &(struct rlimit){s->max_fds, s->max_fds}) < 0)
		return child_fail(c, "rlimit_nofile");
	/* (counted per uid: an NF's own, so this bounds its threads) */
	if (s->max_tasks != 0 &&
	    setrlimit(RLIMIT_NPROC, &(struct rlimit){s->max_tasks, s->max_tasks}) < 0)
		return child_fail(c, "rlimit_nproc");
	if (s->namespaces)
		hide_fs(c);
	if (s->set_user)
		drop_privileges(c);
	/* After the uid change, which clears it. The manager's main thread
	 * spawns and lives as long as the manager; should it have died before
	 * this line, the parent is another (in a pid namespace of its own the
	 * parent is always 0: its end comes as the namespace's). */
	if (prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0) < 0)
		return child_fail(c, "pdeathsig");
	if (!s->namespaces && getppid() != s->parent) {
		errno = ESRCH;
		return child_fail(c, "parent_gone");
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return child_fail(c, "no_new_privs");
	if (s->filter != NULL && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, s->filter, 0, 0) < 0)
		return child_fail(c, "seccomp");
	pthread_sigmask(SIG_SETMASK, &c->mask, NULL);
	execve(s->exec, s->argv, s->envp);
	return child_fail(c, "exec");
}

int
mgr_spawn(const struct mgr_spawn *s, pid_t *pid, const char **step)
{
	struct child c = {.s = s};
	sigset_t all;
	void *stack;
	int ret = 0;

	stack = mmap(NULL, STACK_BYTES, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED) {
		*step = "stack";
		return -errno;
	}
	/* No signal until the child has reset the handlers. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &c.mask);
	/* CLONE_VFORK: back here once the child has exec'd or failed. */
	*pid = clone(child_main, (char *)stack + STACK_BYTES,
		     CLONE_VM | CLONE_VFORK | CLONE_FILES | SIGCHLD |
			     (s->namespaces
				      ? CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET
				      : 0),
		     &c);
	if (*pid < 0) {
		ret = -errno;
		*step = "clone";
		*pid = 0;
	} else if (c.err != 0) {
		ret = -c.err;
		*step = c.step;
		waitpid(*pid, NULL, 0);
		/* reaped here: no pid of it may stay where the reaper, the stop
		 * or a kill would take it for a live NF (or, reused, another's) */
		*pid = 0;
	}
	pthread_sigmask(SIG_SETMASK, &c.mask, NULL);
	munmap(stack, STACK_BYTES);
	return ret;
}
