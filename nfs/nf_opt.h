/* SPDX-License-Identifier: BSD-3-Clause
 * Shared by the NFs in nfs/: argument parsing that runs before the NF
 * attaches to the region, so --help and argument errors work without a
 * manager, and one mapping of failures to exit codes (STYLE.md: 0 ok,
 * 1 failed at run time, 2 bad arguments).
 */
#ifndef SQUALL_NFS_NF_OPT_H
#define SQUALL_NFS_NF_OPT_H

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <squall/squall.h>

#define NF_EXIT_OK    0
#define NF_EXIT_FAIL  1
#define NF_EXIT_USAGE 2

/* "+": stop at the first non-option instead of permuting argv, so argv is
 * still intact when sq_nf_init() looks for its own options. */
#define NF_OPT_SHORT "+h"

/* --help, and the options of libsquall, which sq_nf_init() takes out of argv
 * later: the NF skips those two, for which getopt_long() returns 0. */
#define NF_OPT_COMMON_LONGOPTS                                                            \
	{"sq-region", required_argument, NULL, 0}, {"sq-id", required_argument, NULL, 0}, \
	{                                                                                 \
		"help", no_argument, NULL, 'h'                                            \
	}

#define NF_OPT_COMMON_HELP                                                    \
	"  -h, --help      show this help and exit\n"                         \
	"\n"                                                                  \
	"squall-mgr starts NFs and passes the region (SQUALL_REGION_FD, or\n" \
	"SQUALL_REGION) and the NF id (SQUALL_NF_ID) in the environment;\n"   \
	"by hand, add --sq-region PATH --sq-id N. SQUALL_LOG_LEVEL=debug\n"   \
	"for more logs.\n"

/* After a getopt_long() error (already printed by getopt). */
static inline int
nf_opt_usage_error(const char *prog)
{
	fprintf(stderr, "Try '%s --help'.\n", prog);
	return NF_EXIT_USAGE;
}

/* NFs take no positional arguments. @return 0 or NF_EXIT_USAGE. */
static inline int
nf_opt_check_done(const char *prog, int argc, char **argv)
{
	if (optind >= argc)
		return 0;
	fprintf(stderr, "%s: unexpected argument \"%s\"\n", prog, argv[optind]);
	return nf_opt_usage_error(prog);
}

/* Parse a decimal integer in [min, max] for option --@p opt.
 * @return 0, or -EINVAL after printing why to stderr. */
static inline int
nf_opt_u64(const char *prog, const char *opt, const char *s, uint64_t min, uint64_t max,
	   uint64_t *out)
{
	unsigned long long v;
	char *end;

	errno = 0;
	/* strtoull() would accept " 1" and turn "-1" into ULLONG_MAX. */
	if (!isdigit((unsigned char)s[0]))
		goto bad;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < min || v > max)
		goto bad;
	*out = v;
	return 0;
bad:
	fprintf(stderr,
		"%s: --%s: expected an integer from %" PRIu64 " to %" PRIu64 ", got \"%s\"\n", prog,
		opt, min, max, s);
	return -EINVAL;
}

/* Attach to the region (libsquall logs why it cannot).
 * @return 0, or the exit code for main(): NF_EXIT_USAGE when the region or
 *   the NF id is missing or wrong, NF_EXIT_FAIL otherwise. */
static inline int
nf_opt_attach(int argc, char **argv, struct sq_nf **nf)
{
	int ret = sq_nf_init(argc, argv, nf);

	if (ret >= 0)
		return 0;
	return ret == -EINVAL ? NF_EXIT_USAGE : NF_EXIT_FAIL;
}

#endif /* SQUALL_NFS_NF_OPT_H */
