/* SPDX-License-Identifier: BSD-3-Clause
 * Logging for NFs: DPDK's levels, to stderr, no EAL needed.
 */
#ifndef SQUALL_LOG_H
#define SQUALL_LOG_H

#include <rte_log.h>

/** Messages above this level are dropped; SQUALL_LOG_LEVEL=debug raises it. */
extern int sq_log_level;

/** printf-style log line "squall <tag>: <level>: <message>" on stderr. */
void sq_log(int level, const char *tag, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/** SQ_LOG(ERR, NF, "fmt", ...): level is one of DPDK's (ERR, WARNING, NOTICE, INFO, DEBUG). */
#define SQ_LOG(level, tag, ...)                                     \
	do {                                                        \
		if ((int)RTE_LOG_##level <= sq_log_level)           \
			sq_log(RTE_LOG_##level, #tag, __VA_ARGS__); \
	} while (0)

#endif /* SQUALL_LOG_H */
