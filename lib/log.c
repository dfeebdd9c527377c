/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdarg.h>
#include <stdio.h>

#include <squall/log.h>

int sq_log_level = RTE_LOG_NOTICE;

static const char *const level_names[] = {
	[RTE_LOG_EMERG] = "EMERG", [RTE_LOG_ALERT] = "ALERT",     [RTE_LOG_CRIT] = "CRIT",
	[RTE_LOG_ERR] = "ERR",     [RTE_LOG_WARNING] = "WARNING", [RTE_LOG_NOTICE] = "NOTICE",
	[RTE_LOG_INFO] = "INFO",   [RTE_LOG_DEBUG] = "DEBUG",
};

void
sq_log(int level, const char *tag, const char *fmt, ...)
{
	va_list ap;
	const char *name = "?";

	if (level >= (int)RTE_LOG_EMERG && level <= (int)RTE_LOG_DEBUG)
		name = level_names[level];
	fprintf(stderr, "squall %s: %s: ", tag, name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}
