/* SPDX-License-Identifier: BSD-3-Clause
 * Unit tests for mgr/config.c: good configs load with the values and defaults
 * expected, and each bad config fails with the exact "file:line: field: why".
 *
 * Run from tests/unit (meson's workdir): fixtures are read from configs/.
 * NF binaries are resolved against a temporary directory holding an
 * executable "fake-nf" and a non-executable "noexec-nf", passed as nf_path.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "config_emit.h"

static unsigned int n_passed;
static unsigned int n_failed;

static struct sq_config cfg; /* ~70 KiB: not on the stack */
static char err[SQ_CFG_ERR_LEN];

/* Short enough that the expected strings built from them always fit. */
static char tmp_dir[256];  /* as created */
static char real_dir[256]; /* its realpath, as config.c stores exec paths */

#define CHECK(cond) check((cond), #cond, __func__, __LINE__)

static bool
check(bool ok, const char *what, const char *func, int line)
{
	if (ok) {
		n_passed++;
		return true;
	}
	n_failed++;
	printf("FAIL %s:%d: %s\n", func, line, what);
	return false;
}

static void
check_str(const char *got, const char *want, const char *func, int line)
{
	if (check(strcmp(got, want) == 0, "strings equal", func, line))
		return;
	printf("     got:  %s\n     want: %s\n", got, want);
}

#define CHECK_STR(got, want) check_str((got), (want), __func__, __LINE__)

static int
write_file(const char *dir, const char *name, const char *text, mode_t mode)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (f == NULL)
		return -errno;
	fputs(text, f);
	if (fclose(f) != 0)
		return -errno;
	return chmod(path, mode) < 0 ? -errno : 0;
}

/* tmp_dir/fake-nf (0755), tmp_dir/noexec-nf (0644), tmp_dir/shadow/fake-nf (0644). */
static int
make_fake_nfs(void)
{
	const char *tmp = getenv("TMPDIR");
	char shadow[PATH_MAX], real[PATH_MAX];
	int n, ret;

	n = snprintf(tmp_dir, sizeof(tmp_dir), "%s/squall-test-config-XXXXXX",
		     tmp != NULL ? tmp : "/tmp");
	if (n < 0 || (size_t)n >= sizeof(tmp_dir))
		return -ENAMETOOLONG;
	if (mkdtemp(tmp_dir) == NULL || realpath(tmp_dir, real) == NULL)
		return -errno;
	if (strlen(real) >= sizeof(real_dir))
		return -ENAMETOOLONG;
	strcpy(real_dir, real);
	snprintf(shadow, sizeof(shadow), "%s/shadow", tmp_dir);
	if (mkdir(shadow, 0755) < 0)
		return -errno;
	ret = write_file(tmp_dir, "fake-nf", "#!/bin/sh\nexit 0\n", 0755);
	if (ret == 0)
		ret = write_file(tmp_dir, "noexec-nf", "#!/bin/sh\nexit 0\n", 0644);
	if (ret == 0)
		ret = write_file(shadow, "fake-nf", "#!/bin/sh\nexit 0\n", 0644);
	return ret;
}

static void
remove_fake_nfs(void)
{
	const char *files[] = {"fake-nf", "noexec-nf", "shadow/fake-nf", "rel.yaml", "abs.yaml",
			       "shadow",  NULL};
	char path[PATH_MAX];
	int i;

	for (i = 0; files[i] != NULL; i++) {
		snprintf(path, sizeof(path), "%s/%s", tmp_dir, files[i]);
		remove(path);
	}
	rmdir(tmp_dir);
}

static void
test_defaults(void)
{
	char fake[PATH_MAX];
	int ret;

	ret = sq_config_load("configs/min.yaml", tmp_dir, &cfg, err, sizeof(err));
	if (!CHECK(ret == 0))
		printf("     %s\n", err);
	CHECK_STR(cfg.path, "configs/min.yaml");
	CHECK_STR(cfg.name, "squall");
	CHECK(cfg.region_mb == 256);
	CHECK(cfg.mbufs == 16383);
	CHECK(cfg.mbuf_data_room == 2176);
	CHECK(cfg.stats_interval_ms == 1000);
	CHECK(cfg.nf_core == -1);
	CHECK(cfg.rx_burst == 32);

	CHECK(cfg.n_ports == 1);
	CHECK_STR(cfg.ports[0].devargs[0], "net_null0");
	CHECK(cfg.ports[0].rx_desc == 1024);
	CHECK(cfg.ports[0].tx_desc == 1024);

	CHECK(cfg.n_services == 1);
	snprintf(fake, sizeof(fake), "%s/fake-nf", real_dir);
	CHECK_STR(cfg.services[0].exec, fake);
	CHECK(cfg.services[0].n_args == 0);
	CHECK(cfg.services[0].args[0] == NULL);
	CHECK(cfg.services[0].mode == 0); /* SQ_NF_MODE_SLEEP */
	CHECK(cfg.services[0].instances == 1);
	CHECK(cfg.services[0].ring_slots == 1024);
	CHECK(cfg.services[0].burst_max == 32);
	CHECK(cfg.services[0].batch_budget_pkts == 256);
	CHECK(cfg.services[0].spin_ns == 20000);
	CHECK(cfg.services[0].wake.policy == SQ_WAKE_MIN);
	CHECK(cfg.services[0].wake.timeout_ns == 100000);
	CHECK(cfg.services[0].wake.t_lat_pkts == 36);
	CHECK(cfg.services[0].priority == 0 && cfg.services[0].nice == 0);
	CHECK(cfg.services[0].sched_batch == SQ_BATCH_AUTO);
	CHECK(cfg.services[0].pool_fallback == SQ_FALLBACK_DROP);
	CHECK(cfg.services[0].pool_queue_pkts == 1024);
	CHECK(cfg.services[0].pool_order == SQ_POOL_FIFO && cfg.services[0].pool_backlog_max == 0);
	CHECK(cfg.n_gens == 0 && cfg.chain_priority == 0);
	CHECK(cfg.core_wakes_per_s == 50000);
	CHECK(!cfg.rx_backpressure);
	CHECK(!cfg.idle_after_load);
	CHECK(cfg.core_yield_rounds == 1);
	CHECK(cfg.mgr_nice == 0);

	CHECK(cfg.n_chains == 1);
	CHECK(cfg.chains[0].n_hops == 1);
	CHECK(cfg.chains[0].services[0] == 0);

	CHECK(cfg.n_rules == 1);
	CHECK(cfg.rules[0].in_port == -1);
	CHECK(!cfg.rules[0].has_dst_mac);
	CHECK(cfg.rules[0].chain == 0);
	CHECK(cfg.rules[0].out_port == 0);
	sq_config_free(&cfg);
}

static void
test_wake_and_generator(void)
{
	const struct sq_cfg_service *svc = &cfg.services[0];
	int ret;

	ret = sq_config_load("configs/good_wake_gen.yaml", tmp_dir, &cfg, err, sizeof(err));
	if (!CHECK(ret == 0))
		printf("     %s\n", err);
	CHECK(svc->wake.policy == SQ_WAKE_FIXED);
	CHECK(svc->wake.thresh_pkts == 8);
	CHECK(svc->wake.timeout_ns == 250000);
	CHECK(svc->priority == 5 && svc->nice == -3);
	CHECK(svc->pool_fallback == SQ_FALLBACK_QUEUE && svc->pool_queue_pkts == 77);
	CHECK(svc->pool_order == SQ_POOL_LIFO && svc->pool_backlog_max == 64);
	CHECK(cfg.rules[0].assign == SQ_ASSIGN_SPRAY);
	CHECK(cfg.n_gens == 1);
	CHECK(cfg.gens[0].port == 0 && cfg.gens[0].rate_pps == 1000);
	CHECK(cfg.gens[0].n_sizes == 2 && cfg.gens[0].sizes[1] == 1518);
	CHECK(cfg.gens[0].flows == 7 && cfg.gens[0].has_dst_mac);
	CHECK(cfg.gens[0].dst_mac.addr_bytes[5] == 9);
	sq_config_free(&cfg);
}

static void
test_every_key(void)
{
	const uint8_t mac[RTE_ETHER_ADDR_LEN] = {0x02, 0, 0, 0, 0, 0x0a};
	struct sq_cfg_service *mon = &cfg.services[0];
	int ret;

	ret = sq_config_load("configs/good.yaml", tmp_dir, &cfg, err, sizeof(err));
	if (!CHECK(ret == 0))
		printf("     %s\n", err);
	CHECK_STR(cfg.name, "demo-1");
	CHECK(cfg.region_mb == 512);
	CHECK(cfg.mbufs == 8191);
	CHECK(cfg.mbuf_data_room == 4096);
	CHECK(cfg.stats_interval_ms == 0);
	CHECK(cfg.nf_core == 3);
	CHECK(cfg.rx_burst == 64);
	CHECK(cfg.mgr_nice == 5);
	CHECK(cfg.idle_after_load);
	CHECK(cfg.core_yield_rounds == 4);

	CHECK(cfg.n_ports == 2);
	CHECK_STR(cfg.ports[0].name, "in");
	CHECK_STR(cfg.ports[0].devargs[0], "net_pcap0,rx_pcap=in.pcap");
	CHECK(cfg.ports[0].rx_desc == 512);
	CHECK(cfg.ports[0].tx_desc == 2048);
	CHECK(cfg.ports[0].line == 14);
	CHECK_STR(cfg.ports[1].name, "out");
	CHECK(cfg.ports[1].rx_desc == 1024);
	CHECK(cfg.ports[1].line == 18);

	CHECK(cfg.n_services == 2);
	CHECK_STR(mon->name, "mon");
	CHECK(mon->n_args == 2);
	CHECK(mon->args[0] != NULL && strcmp(mon->args[0], "--interval-ms") == 0);
	CHECK(mon->args[1] != NULL && strcmp(mon->args[1], "500") == 0);
	CHECK(mon->args[2] == NULL);
	CHECK(mon->mode == 1); /* SQ_NF_MODE_POLL */
	CHECK(mon->instances == 2);
	CHECK(mon->ring_slots == 4096);
	CHECK(mon->burst_max == 16);
	CHECK(mon->batch_budget_pkts == 0);
	CHECK(mon->spin_ns == 5000);
	CHECK(mon->line == 21);
	CHECK(cfg.services[1].mode == 0);
	CHECK(cfg.services[1].line == 30);

	CHECK(cfg.n_chains == 2);
	CHECK(cfg.chains[0].n_hops == 2);
	CHECK(cfg.chains[0].services[0] == 0);
	CHECK(cfg.chains[0].services[1] == 1);
	CHECK(cfg.chains[0].line == 34);
	CHECK_STR(cfg.chains[1].name, "fwd-only");
	CHECK(cfg.chains[1].n_hops == 1);
	CHECK(cfg.chains[1].services[0] == 1);

	CHECK(cfg.n_rules == 2);
	CHECK(cfg.rules[0].in_port == 0);
	CHECK(cfg.rules[0].has_dst_mac);
	CHECK(memcmp(cfg.rules[0].dst_mac.addr_bytes, mac, sizeof(mac)) == 0);
	CHECK(cfg.rules[0].chain == 0);
	CHECK(cfg.rules[0].out_port == 1);
	CHECK(cfg.rules[0].line == 40);
	CHECK(cfg.rules[1].in_port == -1);
	CHECK(!cfg.rules[1].has_dst_mac);
	CHECK(cfg.rules[1].chain == 1);
	CHECK(cfg.rules[1].out_port == 0);
	CHECK(cfg.rules[1].line == 44);

	CHECK(sq_config_port_index(&cfg, "out") == 1);
	CHECK(sq_config_port_index(&cfg, "nope") == -1);
	CHECK(sq_config_service_index(&cfg, "fwd") == 1);
	CHECK(sq_config_service_index(&cfg, "in") == -1);
	CHECK(sq_config_chain_index(&cfg, "fwd-only") == 1);
	CHECK(sq_config_chain_index(&cfg, "mon") == -1);

	sq_config_free(&cfg);
	CHECK(mon->args[0] == NULL && mon->n_args == 0);
	sq_config_free(&cfg); /* twice is harmless */
}

/* Each bad fixture and its exact error; lines count from 1 in the fixture. */
static const struct {
	const char *file;
	const char *err;
} bad_configs[] = {
	{"bad_unknown_key", "7: services[0].colour: unknown key"},
	{"bad_unknown_top", "13: colour: unknown key"},
	{"bad_dup_key", "7: services[0].exec: duplicate key"},
	{"bad_not_mapping", "1: expected a mapping, got a sequence"},
	{"bad_empty", "1: empty file, expected a mapping"},
	{"bad_syntax", "10: did not find expected ',' or ']' (while parsing a flow sequence "
		       "at line 9)"},
	{"bad_manager_null", "1: manager: expected a mapping, got nothing"},
	{"bad_ports_mapping", "2: ports: expected a sequence of 1 to 16 entries, got a mapping"},
	{"bad_empty_seq", "7: chains: expected 1 to 64 entries, got 0"},
	{"bad_int_seq", "7: services[0].instances: expected an integer from 1 to 16384, got a "
			"sequence"},
	{"bad_int_word", "7: services[0].instances: expected an integer from 1 to 16384, got "
			 "\"many\""},
	{"bad_int_junk", "2: manager.region_mb: expected an integer from 16 to 65536, got "
			 "\"256MB\""},
	{"bad_int_range", "2: manager.nf_core: expected an integer from -1 to 1023, got "
			  "\"-2\""},
	{"bad_core_wakes", "2: manager.core_wakes_per_s: expected an integer from 0 to 10000000, "
			   "got \"20000000\""},
	{"bad_int_negative", "4: ports[0].rx_desc: expected an integer from 64 to 16384, got "
			     "\"-1024\""},
	{"bad_int_overflow", "2: manager.mbufs: expected an integer from 1023 to 4194303, got "
			     "\"99999999999999999999999\""},
	{"bad_int_hex", "7: services[0].burst_max: expected an integer from 1 to 32, got "
			"\"0x10\""},
	{"bad_burst_max", "7: services[0].burst_max: expected an integer from 1 to 32, got "
			  "\"33\""},
	{"bad_missing_key", "5: services[0]: missing required key \"exec\""},
	{"bad_missing_section", "1: missing required key \"rules\""},
	{"bad_chain_service", "11: chains[0].services[1]: unknown service \"nat\""},
	{"bad_rule_chain", "11: rules[0].chain: unknown chain \"mail\""},
	{"bad_rule_port", "12: rules[0].out_port: unknown port \"out\""},
	{"bad_rule_in_port", "11: rules[0].in_port: unknown port \"eth9\""},
	{"bad_mac", "11: rules[0].dst_mac: expected a MAC address like \"02:00:00:00:00:01\", "
		    "got \"02:00:00:00:00:0g\""},
	{"bad_mac_short", "11: rules[0].dst_mac: expected a MAC address like "
			  "\"02:00:00:00:00:01\", got \"2:0:0:0:0:1\""},
	{"bad_mode", "7: services[0].mode: expected \"sleep\" or \"poll\", got \"fast\""},
	{"bad_ring_slots", "7: services[0].ring_slots: expected a power of two from 64 to "
			   "65536, got \"1000\""},
	{"bad_ring_slots_small", "7: services[0].ring_slots: expected a power of two from 64 "
				 "to 65536, got \"32\""},
	{"bad_dup_port", "4: ports[1].name: duplicate port name \"in\" (first at line 2)"},
	{"bad_dup_service", "7: services[1].name: duplicate service name \"mon\" (first at "
			    "line 5)"},
	{"bad_dup_chain", "10: chains[1].name: duplicate chain name \"web\" (first at line "
			  "8)"},
	{"bad_name", "2: ports[0].name: expected a name of 1 to 31 characters from "
		     "[A-Za-z0-9_-], got \"my port\""},
	{"bad_devargs_empty", "3: ports[0].devargs: expected a non-empty string of at most 511 "
			      "characters, got \"\""},
	{"bad_args_type", "7: services[0].args[1]: expected a string, got a mapping"},
	{"bad_args_many", "7: services[0].args: expected 0 to 16 entries, got 17"},
	{"bad_exec_relative", "6: services[0].exec: \"./no-such-nf\" not found (looked for "
			      "\"configs/./no-such-nf\")"},
	{"bad_exec_absolute", "6: services[0].exec: \"/nonexistent/squall-nf\" not found"},
	{"bad_wake_policy", "7: services[0].wake.policy: expected \"min\", \"fixed\" or "
			    "\"adaptive\", got \"sometimes\""},
	{"bad_pool_fallback", "7: services[0].pool_fallback: expected \"drop\", \"rss\" or "
			      "\"queue\", got \"wait\""},
	{"bad_pool_order", "7: services[0].pool_order: expected \"fifo\" or \"lifo\", got "
			   "\"newest\""},
	{"bad_wake_bounds", "7: services[0].wake.min_pkts: 10 is above max_pkts 4"},
	{"bad_scale_high_wm", "7: services[0].scale.high_wm: 20 is not above low_wm 30 (its "
			      "default): give low_wm below it"},
	{"bad_priority", "7: services[0].priority: expected an integer from 0 to 98, got "
			 "\"100\""},
	{"bad_sched_batch", "7: services[0].sched_batch: expected \"auto\", \"true\" or "
			    "\"false\", got \"yes\""},
	{"bad_rx_backpressure", "2: manager.rx_backpressure: expected \"false\" or \"true\", "
				"got \"on\""},
	{"bad_idle_after_load", "2: manager.idle_after_load: expected \"false\" or \"true\", "
				"got \"1\""},
	{"bad_core_yield_rounds", "2: manager.core_yield_rounds: expected an integer from 1 to 64, "
				  "got \"0\""},
	{"bad_mgr_nice", "2: manager.nice: expected an integer from -20 to 19, got \"-21\""},
	{"bad_gen_dup_port", "13: generator[1].port: port \"in\" has a generator already (line "
			     "13)"},
	{"bad_gen_size", "13: generator.sizes[1]: expected an integer from 64 to 1518, got "
			 "\"2000\""},
};

static void
expect_error(const char *path, const char *nf_path, const char *want)
{
	int ret;

	ret = sq_config_load(path, nf_path, &cfg, err, sizeof(err));
	if (!CHECK(ret == -EINVAL))
		printf("     %s: returned %d\n", path, ret);
	CHECK_STR(err, want);
	sq_config_free(&cfg);
}

static void
test_bad_configs(void)
{
	char path[256], want[SQ_CFG_ERR_LEN];
	size_t i;

	for (i = 0; i < sizeof(bad_configs) / sizeof(bad_configs[0]); i++) {
		snprintf(path, sizeof(path), "configs/%s.yaml", bad_configs[i].file);
		snprintf(want, sizeof(want), "%s:%s", path, bad_configs[i].err);
		expect_error(path, tmp_dir, want);
	}
}

static void
test_exec_errors(void)
{
	char want[SQ_CFG_ERR_LEN], shadow[PATH_MAX];

	snprintf(want, sizeof(want),
		 "configs/bad_exec_missing.yaml:6: services[0].exec: "
		 "\"squall-nf-nope\" not found in %s or $PATH",
		 tmp_dir);
	expect_error("configs/bad_exec_missing.yaml", tmp_dir, want);
	expect_error("configs/bad_exec_missing.yaml", NULL,
		     "configs/bad_exec_missing.yaml:6: services[0].exec: \"squall-nf-nope\" "
		     "not found in $PATH");

	snprintf(want, sizeof(want),
		 "configs/bad_exec_noexec.yaml:6: services[0].exec: "
		 "\"%s/noexec-nf\" is not executable",
		 real_dir);
	expect_error("configs/bad_exec_noexec.yaml", tmp_dir, want);

	/* Found only as a non-executable file: say so, naming that file. */
	snprintf(shadow, sizeof(shadow), "%s/shadow", tmp_dir);
	snprintf(want, sizeof(want),
		 "configs/min.yaml:7: services[0].exec: "
		 "\"%s/shadow/fake-nf\" is not executable",
		 real_dir);
	expect_error("configs/min.yaml", shadow, want);
}

static void
expect_exec(const char *path, const char *nf_path)
{
	char want[PATH_MAX];
	int ret;

	ret = sq_config_load(path, nf_path, &cfg, err, sizeof(err));
	if (!CHECK(ret == 0))
		printf("     %s\n", err);
	snprintf(want, sizeof(want), "%s/fake-nf", real_dir);
	CHECK_STR(cfg.services[0].exec, want);
	sq_config_free(&cfg);
}

static void
test_exec_resolution(void)
{
	static const char cfg_fmt[] = "ports: [{name: in, devargs: net_null0}]\n"
				      "services: [{name: mon, exec: %s}]\n"
				      "chains: [{name: web, services: [mon]}]\n"
				      "rules: [{chain: web, out_port: in}]\n";
	char text[PATH_MAX + 256], path[PATH_MAX], dirs[2 * PATH_MAX + 2];
	char *saved_path;

	/* A '/' in exec: relative to the config file's directory, or absolute. */
	snprintf(text, sizeof(text), cfg_fmt, "./fake-nf");
	CHECK(write_file(tmp_dir, "rel.yaml", text, 0644) == 0);
	snprintf(path, sizeof(path), "%s/rel.yaml", tmp_dir);
	expect_exec(path, NULL);

	snprintf(path, sizeof(path), "%s/fake-nf", tmp_dir);
	snprintf(text, sizeof(text), cfg_fmt, path);
	CHECK(write_file(tmp_dir, "abs.yaml", text, 0644) == 0);
	snprintf(path, sizeof(path), "%s/abs.yaml", tmp_dir);
	expect_exec(path, NULL);

	/* An executable later in nf_path wins over a non-executable earlier. */
	snprintf(dirs, sizeof(dirs), "%s/shadow::%s", tmp_dir, tmp_dir);
	expect_exec("configs/min.yaml", dirs);

	/* No nf_path: $PATH. */
	saved_path = getenv("PATH") != NULL ? strdup(getenv("PATH")) : NULL;
	snprintf(dirs, sizeof(dirs), "/nonexistent:%s", tmp_dir);
	setenv("PATH", dirs, 1);
	expect_exec("configs/min.yaml", NULL);
	expect_exec("configs/min.yaml", "");
	if (saved_path != NULL)
		setenv("PATH", saved_path, 1);
	else
		unsetenv("PATH");
	free(saved_path);
}

static void
test_cannot_open(void)
{
	int ret;

	ret = sq_config_load("configs/nope.yaml", tmp_dir, &cfg, err, sizeof(err));
	CHECK(ret == -ENOENT);
	CHECK_STR(err, "configs/nope.yaml: cannot open: No such file or directory");

	ret = sq_config_load("configs", tmp_dir, &cfg, err, sizeof(err));
	CHECK(ret == -ENOENT);
	CHECK_STR(err, "configs: cannot open: Is a directory");
}

/* err may be NULL; a short err is truncated, never overrun. */
static void
test_err_buffer(void)
{
	char small[16];

	CHECK(sq_config_load("configs/bad_mode.yaml", tmp_dir, &cfg, NULL, 0) == -EINVAL);
	memset(small, 'x', sizeof(small));
	CHECK(sq_config_load("configs/bad_mode.yaml", tmp_dir, &cfg, small, 8) == -EINVAL);
	CHECK_STR(small, "configs");
	CHECK(small[8] == 'x');
}

/* Every field the loader fills, except where it came from (path, lines). */
static bool
same_config(const struct sq_config *a, const struct sq_config *b)
{
	struct sq_config x = *a, y = *b;

	memset(x.path, 0, sizeof(x.path));
	memset(y.path, 0, sizeof(y.path));
	for (int i = 0; i < SQ_MAX_PORTS; i++)
		x.ports[i].line = y.ports[i].line = 0;
	for (int i = 0; i < SQ_MAX_CHAINS; i++)
		x.chains[i].line = y.chains[i].line = 0;
	for (int i = 0; i < SQ_MAX_RULES; i++)
		x.rules[i].line = y.rules[i].line = 0;
	for (int i = 0; i < SQ_MAX_GENS; i++)
		x.gens[i].line = y.gens[i].line = 0;
	for (int i = 0; i < SQ_MAX_SERVICES; i++) {
		if (x.services[i].n_args != y.services[i].n_args)
			return false;
		for (uint32_t j = 0; j < x.services[i].n_args; j++)
			if (strcmp(x.services[i].args[j], y.services[i].args[j]) != 0)
				return false;
		memset(x.services[i].args, 0, sizeof(x.services[i].args));
		memset(y.services[i].args, 0, sizeof(y.services[i].args));
		x.services[i].line = y.services[i].line = 0;
	}
	return memcmp(&x, &y, sizeof(x)) == 0;
}

static struct sq_config cfg2;

/* `get config` round-trips: load, emit, load the text, emit again: the same
 * values and the same bytes. */
static void
test_emit_round_trip(void)
{
	const char *files[] = {"configs/good.yaml", "configs/good_wake_gen.yaml",
			       "configs/min.yaml"};
	char path[PATH_MAX];
	char *text1 = NULL, *text2 = NULL;
	int ret;

	snprintf(path, sizeof(path), "%s/emitted.yaml", tmp_dir);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		ret = sq_config_load(files[i], tmp_dir, &cfg, err, sizeof(err));
		if (!CHECK(ret == 0)) {
			printf("     %s: %s\n", files[i], err);
			continue;
		}
		CHECK(sq_config_emit(&cfg, &text1, NULL) == 0);
		CHECK(text1 != NULL && write_file(tmp_dir, "emitted.yaml", text1, 0644) == 0);
		ret = sq_config_load(path, tmp_dir, &cfg2, err, sizeof(err));
		if (!CHECK(ret == 0))
			printf("     %s emitted: %s\n%s\n", files[i], err, text1);
		if (!CHECK(same_config(&cfg, &cfg2)))
			printf("     %s: the emitted text loads to other values:\n%s\n", files[i],
			       text1);
		CHECK(sq_config_emit(&cfg2, &text2, NULL) == 0);
		if (text1 != NULL && text2 != NULL)
			CHECK_STR(text2, text1);
		free(text1);
		free(text2);
		text1 = text2 = NULL;
		sq_config_free(&cfg);
		sq_config_free(&cfg2);
	}
	remove(path);
}

int
main(void)
{
	int ret;

	ret = make_fake_nfs();
	if (ret < 0) {
		printf("cannot make fake NFs in %s: %s\n", tmp_dir, strerror(-ret));
		return 1;
	}
	test_defaults();
	test_every_key();
	test_wake_and_generator();
	test_bad_configs();
	test_exec_errors();
	test_exec_resolution();
	test_cannot_open();
	test_err_buffer();
	test_emit_round_trip();
	remove_fake_nfs();

	printf("%u passed, %u failed\n", n_passed, n_failed);
	return n_failed == 0 ? 0 : 1;
}
