/* SPDX-License-Identifier: BSD-3-Clause
 * squall-mgr: the DPDK primary. Reads the config, builds the shared region,
 * starts the ports and the NFs, and runs the roles until told to stop.
 * Exit status: 0 ok, 1 failed at run time, 2 bad arguments or config.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_version.h>
#include <rte_launch.h>
#include <rte_lcore.h>

#include "attach.h"
#include "capture.h"
#include "control.h"
#include "ctlprio.h"
#include "idle.h"
#include "mgr.h"
#include "sandbox.h"
#include "msg.h"
#include "scaler.h"

RTE_LOG_REGISTER(sq_logtype_mgr, squall.mgr, NOTICE);

enum exit_code { EXIT_OK = 0, EXIT_FAILED = 1, EXIT_USAGE = 2 };

#define CTL_PERIOD_MS         10
/* Reap without a SIGCHLD this often too, in case one was missed. */
#define REAP_ANYWAY_MS        1000
#define MAX_EAL_ARGS          64
/* The longest sleep while isolated NFs hold packets (mgr/idle.h). */
#define ISOLATED_SLEEP_MAX_NS UINT64_C(20000)

struct options {
	const char *config;
	const char *nf_path;
	const char *exit_stats;
	const char *region_dir;
	uint64_t run_ms;
	uint64_t idle_exit_ms;
	bool check_only;
	bool quiet;
	int eal_argc;
	char **eal_argv;
};

static volatile bool stop_requested;
/* Set by SIGCHLD: reap then. waitpid(-1) looks at every child, and with
 * thousands of NFs calling it every round of the control period cost the
 * manager's core 3% for nothing. */
static volatile sig_atomic_t child_exited = 1;

static void
on_signal(int sig)
{
	(void)sig;
	stop_requested = true;
}

static void
on_sigchld(int sig)
{
	(void)sig;
	child_exited = 1;
}

static void
usage(FILE *f)
{
	fprintf(f,
		"Usage: squall-mgr [OPTIONS] CONFIG [-- EAL-ARGS...]\n"
		"\n"
		"Run the Squall packet manager with the ports, NFs, chains and rules of the\n"
		"YAML file CONFIG (see README.md). Stops cleanly on SIGINT or SIGTERM.\n"
		"\n"
		"Options:\n"
		"  --check             check CONFIG and exit: 0 if good, 2 if not\n"
		"  --nf-path DIRS      colon-separated directories searched first for NF\n"
		"                      executables named without a '/' (then the install's\n"
		"                      %s, the build's %s, $PATH)\n"
		"  --region-dir DIR    create the shared region file in DIR (default:\n"
		"                      /dev/hugepages if hugetlbfs is mounted, else /dev/shm)\n"
		"  --exit-stats FILE   write the final counters as JSON to FILE on exit\n"
		"  --run-s SECONDS     stop after SECONDS (may be fractional)\n"
		"  --idle-exit-ms MS   stop once no packet moved for MS ms after the first did\n"
		"  -q, --quiet         no periodic stats line\n"
		"  -h, --help          this text\n"
		"  --version           print the version\n"
		"\n"
		"EAL-ARGS go to DPDK after the defaults: -l 0 --in-memory\n"
		"--file-prefix squall-NAME (NAME is manager.name), or --no-huge -m512 if no\n"
		"hugepages are free; --no-pci, or -a ADDR for each port given by its PCI\n"
		"address; --log-level=pmd.net.pcap:warning. Give two lcores (e.g. -- -l 0,2)\n"
		"to run rx on its own lcore.\n"
		"\n"
		"Exit status: 0 ok, 1 failed at run time (or mbufs leaked), 2 bad arguments or\n"
		"config.\n",
		SQ_NF_INSTALL_DIR, SQ_NF_BUILD_DIR);
}

static int
parse_args(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{"check", no_argument, NULL, 'c'},
		{"nf-path", required_argument, NULL, 'n'},
		{"region-dir", required_argument, NULL, 'r'},
		{"exit-stats", required_argument, NULL, 'e'},
		{"run-s", required_argument, NULL, 's'},
		{"idle-exit-ms", required_argument, NULL, 'i'},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	char *end;
	int opt;

	while ((opt = getopt_long(argc, argv, "qh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c': o->check_only = true; break;
		case 'n': o->nf_path = optarg; break;
		case 'r': o->region_dir = optarg; break;
		case 'e': o->exit_stats = optarg; break;
		case 'q': o->quiet = true; break;
		case 's': {
			double s = strtod(optarg, &end);

			if (*end != '\0' || s <= 0) {
				fprintf(stderr,
					"squall-mgr: --run-s: expected seconds > 0, got \"%s\"\n",
					optarg);
				return -EINVAL;
			}
			o->run_ms = (uint64_t)(s * 1000);
			break;
		}
		case 'i':
			o->idle_exit_ms = strtoull(optarg, &end, 10);
			if (*end != '\0' || o->idle_exit_ms == 0) {
				fprintf(stderr,
					"squall-mgr: --idle-exit-ms: expected ms > 0, got \"%s\"\n",
					optarg);
				return -EINVAL;
			}
			break;
		case 'h': usage(stdout); exit(EXIT_OK);
		case 'V': printf("squall-mgr %s (%s)\n", SQ_VERSION, rte_version()); exit(EXIT_OK);
		default: usage(stderr); return -EINVAL;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "squall-mgr: no CONFIG given (try --help)\n");
		return -EINVAL;
	}
	o->config = argv[optind++];
	/* getopt_long stops at "--"; the rest is DPDK's. */
	o->eal_argc = argc - optind;
	o->eal_argv = argv + optind;
	return 0;
}

static bool
hugepages_free(void)
{
	FILE *f = fopen("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages", "r");
	unsigned long n = 0;

	if (f == NULL)
		return false;
	if (fscanf(f, "%lu", &n) != 1)
		n = 0;
	fclose(f);
	return n >= 64;
}

static bool
user_gave(const struct options *o, const char *flag)
{
	for (int i = 0; i < o->eal_argc; i++)
		if (strncmp(o->eal_argv[i], flag, strlen(flag)) == 0)
			return true;
	return false;
}

/* The threads that answer commands above every NF (ctlprio.h): DPDK's
 * telemetry listener exists now; its connections' threads inherit. */
static void
raise_control(const struct sq_config *cfg)
{
	int ret = mgr_ctlprio_raise_all(cfg->control_realtime);

	if (ret < 0 && cfg->control_realtime)
		MGR_LOG(WARNING,
			"telemetry and control threads not at SCHED_FIFO %d (%s): an NF that "
			"spins at SCHED_RR can starve them\n",
			MGR_CTL_PRIORITY, strerror(-ret));
	else if (ret == 0)
		MGR_LOG(WARNING, "no telemetry thread found to raise\n");
}

/* DPDK's own arguments: our defaults, then the user's, which win. */
static int
init_eal(const struct options *o, const struct sq_config *cfg, const char *prog)
{
	static char prefix[64];
	char *args[MAX_EAL_ARGS];
	int n = 0;

	snprintf(prefix, sizeof(prefix), "--file-prefix=squall-%s", cfg->name);
	args[n++] = (char *)(uintptr_t)prog;
	if (!user_gave(o, "-l") && !user_gave(o, "--lcores") && !user_gave(o, "-c"))
		args[n++] = "-l0";
	if (!user_gave(o, "--file-prefix"))
		args[n++] = prefix;
	if (!user_gave(o, "--no-huge") && !user_gave(o, "--in-memory")) {
		if (hugepages_free()) {
			args[n++] = "--in-memory";
		} else {
			MGR_LOG(WARNING, "no free hugepages: DPDK runs with --no-huge\n");
			args[n++] = "--no-huge";
			args[n++] = "-m512";
		}
	}
	n = mgr_ports_eal_args(cfg, args, n, MAX_EAL_ARGS - 2);
	args[n++] = "--log-level=pmd.net.pcap:warning";
	for (int i = 0; i < o->eal_argc && n < MAX_EAL_ARGS - 1; i++)
		args[n++] = o->eal_argv[i];
	args[n] = NULL;
	return rte_eal_init(n, args);
}

/* The calling lcore at manager.nice, once more when a new config changes
 * it (*applied: what it has; @return true if it changed). Above the other
 * programs of its core by default (the NFs there follow, nfs.c): on a small
 * host the manager's transmits carry the kernel's work for its ports (veth
 * delivers into the receiver in the sender's context: on tcp_peers's veth
 * ends 80-87% of the core), so a slice that a host's program takes from
 * that core is taken from the whole path. Per thread: DPDK's threads and
 * the roles' keep their own. */
static bool
apply_nice(const struct mgr *mgr, int32_t *applied)
{
	int32_t want = mgr->cfg->mgr_nice;

	if (want == *applied)
		return false;
	*applied = want; /* tried once per value: one warning, not one a round */
	if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), want) < 0)
		MGR_LOG(WARNING, "lcore %u: cannot set nice %d (manager.nice): %s\n",
			rte_lcore_id(), want, strerror(errno));
	return true;
}

/* rx on its own lcore when DPDK gave us two. */
static int
rx_lcore_main(void *arg)
{
	struct mgr *mgr = arg;
	int32_t nice = 0;

	while (!mgr->stop) {
		apply_nice(mgr, &nice);
		mgr_rx_poll(mgr);
	}
	return 0;
}

/* What would end the manager's idleness now (mgr/idle.h), and the longest
 * it may sleep: until the next wake timeout or control period. */
static enum mgr_idle_wait
idle_wait(struct mgr *mgr, uint64_t now, uint64_t next_ctl, uint64_t *limit_ns)
{
	uint64_t hz = rte_get_tsc_hz();
	uint64_t ctl_ns = next_ctl > now ? (next_ctl - now) * 1000 / (hz / 1000000) : 0;

	*limit_ns = RTE_MIN(ctl_ns, RTE_MIN(mgr_wakeup_next_ns(mgr, &mgr->rx, now),
					    mgr_wakeup_next_ns(mgr, &mgr->tx, now)));
	if (*limit_ns == 0 || mgr_gen_busy(mgr) || mgr_director_busy(mgr) ||
	    atomic_load_explicit(&mgr->sup_busy, memory_order_relaxed) ||
	    atomic_load_explicit(&mgr->cfg_next, memory_order_relaxed) != NULL)
		return MGR_IDLE_BUSY;
	if (!mgr_tx_nfs_hold_pkts(mgr))
		return MGR_IDLE_PORTS;
	/* An isolated NF cannot ring the manager's sleep: look again soon. */
	if (mgr_tx_isolated_hold_pkts(mgr))
		*limit_ns = RTE_MIN(*limit_ns, ISOLATED_SLEEP_MAX_NS);
	return MGR_IDLE_NFS;
}

static void
run_loop(struct mgr *mgr, const struct options *o, bool rx_elsewhere)
{
	uint64_t hz = rte_get_tsc_hz();
	uint64_t ctl_period = hz / 1000 * CTL_PERIOD_MS;
	uint64_t start = rte_rdtsc(), next_ctl = start + ctl_period;
	uint64_t next_reap = start, next_msg = start;
	int32_t nice = 0;

	apply_nice(mgr, &nice);
	while (!stop_requested) {
		unsigned int moved = 0;
		uint64_t now;

		if (!rx_elsewhere)
			moved += mgr_rx_poll(mgr);
		moved += mgr_tx_poll(mgr);
		if (mgr->idle != NULL)
			mgr_idle_yield(mgr->idle, mgr->cfg, mgr_tx_nfs_hold_pkts(mgr), moved);
		/* A dead NF is reaped and restarted at once, not at the next
		 * control period: its service may have no other instance. */
		if (unlikely(child_exited)) {
			child_exited = 0;
			mgr_nfs_poll(mgr);
		}
		if (unlikely(atomic_load_explicit(&mgr->sup_busy, memory_order_relaxed)))
			mgr_nfs_supervise(mgr);
		now = rte_rdtsc();
		mgr_scaler_poll(mgr, now);
		/* NFs' messages: a read of the msg-ready bitmap a millisecond */
		if (now >= next_msg) {
			next_msg = now + hz / 1000;
			mgr_msg_poll(mgr);
		}
		if (now < next_ctl) {
			if (mgr->idle != NULL && mgr_idle_note(mgr->idle, mgr->cfg, moved, now)) {
				uint64_t limit_ns;
				enum mgr_idle_wait wait = idle_wait(mgr, now, next_ctl, &limit_ns);

				mgr_idle_sleep(mgr->idle, mgr->cfg, wait, now, limit_ns);
			}
			continue;
		}
		/* Off the hot path: reap NFs (a system call), print stats. */
		next_ctl = now + ctl_period;
		if (now >= next_reap) {
			child_exited = 0;
			next_reap = now + hz / 1000 * REAP_ANYWAY_MS;
			mgr_nfs_poll(mgr);
		}
		mgr_nfs_watchdog(mgr);
		mgr_nfs_poll_logs(mgr);
		mgr_stats_poll(mgr);
		mgr_control_poll(mgr);
		/* (a config the control poll took may change it: the NFs on the
		 * manager's core follow) */
		if (apply_nice(mgr, &nice))
			mgr_nfs_renice(mgr);
		if (mgr->attach != NULL)
			mgr_attach_poll(mgr->attach);
		if (o->run_ms != 0 && now - start > hz / 1000 * o->run_ms)
			break;
		/* (rx on its own lcore stamps packets after this loop's now:
		 * the plain difference would wrap to "idle for ages") */
		if (o->idle_exit_ms != 0 && mgr->last_pkt_tsc != 0 && now > mgr->last_pkt_tsc &&
		    now - mgr->last_pkt_tsc > hz / 1000 * o->idle_exit_ms)
			break;
	}
}

/* NFs pinned to the manager's own core: the scheduler alone would run them
 * when the busy-polling manager's slice ends (milliseconds, while their
 * rings overflow), so the manager yields to them whenever they hold packets
 * (mgr/idle.h). On a small host this leaves the other cores to the
 * applications, as OVS-DPDK's one PMD core does. */
static void
share_core(struct mgr *mgr, struct mgr_idle *idle)
{
	unsigned int cpu = rte_lcore_to_cpu_id((int)rte_get_main_lcore());

	if (mgr->cfg->nf_core < 0 || (unsigned int)mgr->cfg->nf_core != cpu ||
	    cpu >= SQ_CORE_GROUPS - 1)
		return;
	mgr_idle_share_core(idle, &mgr->region->awake[cpu].n, &mgr->region->awake[cpu].mgr);
	MGR_LOG(NOTICE,
		"NFs share the manager's core %u: it yields to them while they hold packets\n",
		cpu);
}

/* The main lcore's sleep, when it runs rx too (a separate rx lcore polls
 * on: its own sleep would need the tx role's doorbell as well). */
static void
start_idle(struct mgr *mgr, struct mgr_idle *idle)
{
	uint16_t port_ids[SQ_MAX_PORTS];
	int sock_fds[SQ_MAX_PORTS];
	int ret;

	for (uint16_t i = 0; i < mgr->n_ports; i++) {
		port_ids[i] = mgr->ports[i].port_id;
		sock_fds[i] = mgr->ports[i].rx_sock_fd;
	}
	ret = mgr_idle_init(idle, port_ids, sock_fds, mgr->n_ports, &mgr->region->mgr_wait.asleep,
			    mgr->tx_ready, mgr->n_tx_ready_words);
	if (ret < 0) {
		MGR_LOG(WARNING, "idle sleep off: epoll: %s\n", strerror(-ret));
		return;
	}
	if (idle->n_intr > 0)
		MGR_LOG(NOTICE, "%u of %u ports wake the manager by rx interrupt\n", idle->n_intr,
			mgr->n_ports);
	if (idle->n_sock > 0)
		MGR_LOG(NOTICE, "%u of %u ports wake the manager by their sockets\n", idle->n_sock,
			mgr->n_ports);
	mgr->idle = idle;
	share_core(mgr, idle);
}

/* Every NF of the config, one after another, each ready before the next; a
 * per-flow service only its pool's idle target (the director starts the rest
 * as flows come, and takes each one it is told is ready into its pool). */
static int
spawn_all(struct mgr *mgr)
{
	uint32_t started = 0;
	int ret;

	mgr_nfs_announce(mgr);
	for (uint16_t s = 0; s < mgr->cfg->n_services; s++) {
		const struct mgr_service *svc = &mgr->services[s];
		uint32_t n = RTE_MIN(mgr_director_initial_nfs(mgr, s), svc->n_nfs);

		for (uint32_t i = 0; i < n; i++) {
			struct mgr_nf *nf = &mgr->nfs[svc->first_nf + i];

			ret = mgr_nfs_spawn(mgr, nf);
			if (ret < 0)
				return ret;
			ret = mgr_nfs_wait_ready(mgr, nf);
			if (ret < 0)
				return ret;
			mgr_director_nf_ready(mgr, nf);
		}
		started += n;
	}
	MGR_LOG(NOTICE, "%u NFs running\n", started);
	return 0;
}

static int
start(struct mgr *mgr, const struct options *o, char *err, size_t err_len)
{
	int ret;

	ret = mgr_region_create(mgr, o->region_dir);
	if (ret < 0)
		return ret;
	ret = mgr_nfs_init(mgr);
	if (ret < 0)
		return ret;
	if (mgr_role_init(mgr, &mgr->rx) < 0 || mgr_role_init(mgr, &mgr->tx) < 0 ||
	    mgr_tx_init(mgr) < 0 || mgr_director_init(mgr) < 0)
		return -ENOMEM;
	mgr_telemetry_ready(mgr);
	ret = mgr_ports_init(mgr, err, err_len);
	if (ret < 0)
		return ret;
	mgr->mbufs_port_reserved = mgr_mbufs_in_use(mgr);
	ret = mgr_gen_init(mgr);
	if (ret < 0)
		return ret;
	if (mgr->mbufs_port_reserved != 0)
		MGR_LOG(INFO, "ports hold %u mbufs for their rx rings\n", mgr->mbufs_port_reserved);
	/* Built whatever the services: a strict one may be added while running. */
	ret = mgr_sandbox_init();
	if (ret < 0) {
		snprintf(err, err_len, "cannot build the NF sandbox's seccomp filter: %s",
			 strerror(-ret));
		return ret;
	}
	if (mgr_msg_init(mgr) < 0)
		return -ENOMEM;
	ret = spawn_all(mgr);
	if (ret < 0)
		return ret;
	if (mgr_scaler_init(mgr) < 0)
		return -ENOMEM;
	mgr_region_set_state(mgr, SQ_MGR_RUNNING);
	if (mgr_capture_init(mgr) < 0)
		MGR_LOG(WARNING, "capture commands not registered\n");
	return 0;
}

/* Stop in order: rx first (no new packets), then NFs (they hand back what
 * they hold), then ports; only then is every mbuf home. */
static int
shutdown_mgr(struct mgr *mgr, const struct options *o, bool rx_elsewhere)
{
	unsigned int leaked;
	int status = EXIT_OK;

	mgr->stop = true;
	if (rx_elsewhere)
		rte_eal_mp_wait_lcore();
	/* The roles have stopped and hold nothing new from here (mgr->stop). */
	if (mgr_capture_free(mgr) != 0) /* every capture file completed, every copy home */
		status = EXIT_FAILED;
	mgr_wakeup_drop_all_held(mgr, &mgr->rx, SQ_DROP_SHUTDOWN);
	mgr_wakeup_drop_all_held(mgr, &mgr->tx, SQ_DROP_SHUTDOWN);
	mgr_director_drop_waiting(mgr, SQ_DROP_SHUTDOWN);
	if (mgr->region != NULL && mgr->nfs != NULL)
		mgr_nfs_stop_all(mgr);
	/* Telemetry's threads read what is closed and freed from here on: they
	 * answer an error instead. */
	mgr_telemetry_stop(mgr);
	mgr_ports_close(mgr);
	/* Every mbuf home, each once (poolaudit.h): then the counts are the
	 * audit's. 22.11's af_xdp does not give back its fill ring at close:
	 * allow what the ports took before any traffic, and no more. */
	if (mgr->pool != NULL && mgr_pool_audit(mgr->pool, &mgr->pool_audit) == 0) {
		mgr->pool_audited = true;
		if (mgr->pool_audit.doubled != 0) {
			MGR_LOG(ERR, "%u mbufs freed twice: as many others are lost\n",
				mgr->pool_audit.doubled);
			status = EXIT_FAILED;
		}
	}
	leaked = mgr_mbufs_in_use(mgr);
	if (leaked > mgr->mbufs_port_reserved) {
		MGR_LOG(ERR, "%u mbufs not back in the pool at exit\n",
			leaked - mgr->mbufs_port_reserved);
		status = EXIT_FAILED;
	}
	if (o->exit_stats != NULL && mgr->pool != NULL) {
		int ret = mgr_stats_write_json(mgr, o->exit_stats);

		if (ret < 0) {
			MGR_LOG(ERR, "%s: %s\n", o->exit_stats, strerror(-ret));
			status = EXIT_FAILED;
		}
	}
	mgr_scaler_free(mgr);
	mgr_nfs_free(mgr);
	mgr_msg_free(mgr);
	mgr_gen_free(mgr);
	mgr_director_free(mgr);
	mgr_tx_free(mgr);
	mgr_role_free(&mgr->rx);
	mgr_role_free(&mgr->tx);
	mgr_region_destroy(mgr);
	return status;
}

int
main(int argc, char **argv)
{
	static struct sq_config cfg;
	static struct mgr mgr;
	static struct mgr_attach attach = {.listen_fd = -1};
	static struct mgr_idle idle = {.epfd = -1};
	struct options o = {0};
	char err[SQ_CFG_ERR_LEN] = "";
	char nf_path[4096];
	bool rx_elsewhere = false;
	int ret, status;

	if (parse_args(argc, argv, &o) < 0)
		return EXIT_USAGE;
	snprintf(nf_path, sizeof(nf_path), "%s%s%s:%s", o.nf_path ? o.nf_path : "",
		 o.nf_path ? ":" : "", SQ_NF_INSTALL_DIR, SQ_NF_BUILD_DIR);
	ret = sq_config_load(o.config, nf_path, &cfg, err, sizeof(err));
	if (ret < 0) {
		fprintf(stderr, "squall-mgr: %s\n", err);
		return EXIT_USAGE;
	}
	if (o.check_only) {
		printf("%s: ok (%u ports, %u services, %u chains, %u rules)\n", o.config,
		       cfg.n_ports, cfg.n_services, cfg.n_chains, cfg.n_rules);
		sq_config_free(&cfg);
		return EXIT_OK;
	}
	/* Commands go in before EAL opens the socket: a client that sees the
	 * socket can use them (the callbacks cope with a manager still starting). */
	mgr.cfg = &cfg;
	if (mgr_telemetry_init(&mgr) < 0 || mgr_control_init(&mgr, nf_path) < 0)
		fprintf(stderr, "squall-mgr: telemetry commands not registered\n");
	if (init_eal(&o, &cfg, argv[0]) < 0) {
		fprintf(stderr, "squall-mgr: DPDK EAL init failed: %s\n", rte_strerror(rte_errno));
		return EXIT_FAILED;
	}
	raise_control(&cfg);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	{
		struct sigaction sa = {.sa_handler = on_sigchld,
				       .sa_flags = SA_RESTART | SA_NOCLDSTOP};

		sigemptyset(&sa.sa_mask);
		sigaction(SIGCHLD, &sa, NULL);
	}

	mgr.nf_path = o.nf_path;
	mgr.quiet = o.quiet;
	ret = start(&mgr, &o, err, sizeof(err));
	if (ret < 0) {
		if (err[0] != '\0')
			fprintf(stderr, "squall-mgr: %s\n", err);
		status = shutdown_mgr(&mgr, &o, false);
		(void)status;
		sq_config_free(&cfg);
		rte_eal_cleanup();
		return err[0] != '\0' ? EXIT_USAGE : EXIT_FAILED;
	}
	if (rte_lcore_count() >= 2) {
		unsigned int lcore = rte_get_next_lcore(-1, 1, 0);

		mgr.rx_elsewhere = true;
		rx_elsewhere = rte_eal_remote_launch(rx_lcore_main, &mgr, lcore) == 0;
		mgr.rx_elsewhere = rx_elsewhere;
		if (rx_elsewhere)
			MGR_LOG(NOTICE, "rx on lcore %u, tx and control on lcore %u\n", lcore,
				rte_get_main_lcore());
	}
	if (!rx_elsewhere)
		start_idle(&mgr, &idle);
	if (mgr_attach_open(&attach, cfg.name, mgr.region_fd, cfg.attach_uids, cfg.n_attach_uids) ==
	    0)
		mgr.attach = &attach;
	MGR_LOG(NOTICE, "running %s: %u ports, %u NFs, %u chains\n", o.config, mgr.n_ports,
		mgr.n_nfs, cfg.n_chains);
	run_loop(&mgr, &o, rx_elsewhere);
	mgr_attach_close(&attach);
	MGR_LOG(NOTICE, "stopping\n");
	status = shutdown_mgr(&mgr, &o, rx_elsewhere);
	mgr_control_free(&mgr, &cfg);
	mgr_idle_free(&idle);
	mgr_sandbox_free();
	sq_config_free(&cfg);
	rte_eal_cleanup();
	return status;
}
