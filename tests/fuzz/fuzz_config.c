/* SPDX-License-Identifier: BSD-3-Clause
 * libFuzzer target: any bytes as squall-mgr's YAML config (mgr/config.c).
 * Each input must load or fail with an error message, never crash, leak or
 * overflow; a config that loads must only hold indexes within its tables
 * (the manager uses them unchecked).
 *
 * The input is written to a memfd and loaded by its /proc/self/fd path.
 * Services' exec names are resolved in a temporary directory holding
 * executable fake-nf, squall-nf-fwd and squall-nf-monitor (the names the
 * seeds use).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"

static struct sq_config cfg;
static char err[SQ_CFG_ERR_LEN];
static char nf_dir[PATH_MAX];
static char path[64];
static int fd = -1;

static void
make_nf(const char *name)
{
	char p[PATH_MAX + 64];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", nf_dir, name);
	f = fopen(p, "w");
	if (f == NULL || fputs("#!/bin/sh\nexit 0\n", f) < 0 || fclose(f) != 0 || chmod(p, 0755))
		abort();
}

static void
remove_nfs(void)
{
	static const char *const names[] = {"fake-nf", "squall-nf-fwd", "squall-nf-monitor"};
	char p[PATH_MAX + 64];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", nf_dir, names[i]);
		unlink(p);
	}
	rmdir(nf_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *tmp = getenv("TMPDIR");

	(void)argc;
	(void)argv;
	snprintf(nf_dir, sizeof(nf_dir), "%s/squall-fuzz-config-XXXXXX", tmp ? tmp : "/tmp");
	if (mkdtemp(nf_dir) == NULL)
		abort();
	make_nf("fake-nf");
	make_nf("squall-nf-fwd");
	make_nf("squall-nf-monitor");
	atexit(remove_nfs);
	fd = memfd_create("squall-fuzz-config", 0);
	if (fd < 0)
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return 0;
}

#define REQUIRE(cond)                                                                      \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "fuzz_config: loaded config breaks: %s\n", #cond); \
			abort();                                                           \
		}                                                                          \
	} while (0)

static void
check_loaded(void)
{
	unsigned int i, j;

	REQUIRE(cfg.n_ports <= SQ_MAX_PORTS && cfg.n_services <= SQ_MAX_SERVICES);
	REQUIRE(cfg.n_chains <= SQ_MAX_CHAINS && cfg.n_rules <= SQ_MAX_RULES);
	REQUIRE(cfg.n_gens <= SQ_MAX_GENS);
	for (i = 0; i < cfg.n_ports; i++)
		REQUIRE(cfg.ports[i].n_devargs >= 1 &&
			cfg.ports[i].n_devargs <= SQ_MAX_DEVARGS_ALT);
	for (i = 0; i < cfg.n_services; i++) {
		REQUIRE(cfg.services[i].n_args <= SQ_MAX_NF_ARGS);
		REQUIRE(cfg.services[i].args[cfg.services[i].n_args] == NULL);
		REQUIRE(cfg.services[i].instances >= 1);
		REQUIRE(memchr(cfg.services[i].name, '\0', SQ_CFG_NAME_LEN) != NULL);
	}
	for (i = 0; i < cfg.n_chains; i++) {
		REQUIRE(cfg.chains[i].n_hops >= 1 && cfg.chains[i].n_hops <= SQ_MAX_HOPS);
		for (j = 0; j < cfg.chains[i].n_hops; j++)
			REQUIRE(cfg.chains[i].services[j] < cfg.n_services);
	}
	for (i = 0; i < cfg.n_rules; i++) {
		REQUIRE(cfg.rules[i].chain < cfg.n_chains && cfg.rules[i].out_port < cfg.n_ports);
		REQUIRE(cfg.rules[i].in_port >= -1 && cfg.rules[i].in_port < (int)cfg.n_ports);
	}
	for (i = 0; i < cfg.n_gens; i++) {
		REQUIRE(cfg.gens[i].port < cfg.n_ports);
		REQUIRE(cfg.gens[i].n_sizes <= SQ_MAX_GEN_SIZES);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int ret;

	if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
		abort();
	ret = sq_config_load(path, nf_dir, &cfg, err, sizeof(err));
	if (ret == 0)
		check_loaded();
	else if (err[0] == '\0' || memchr(err, '\0', sizeof(err)) == NULL)
		abort(); /* a failure always says why */
	sq_config_free(&cfg);
	return 0;
}
