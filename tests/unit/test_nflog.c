/* SPDX-License-Identifier: BSD-3-Clause
 * nflog: an NF's lines come out whole, behind its name, at most
 * NFLOG_LINES_PER_S a second (the rest counted and said once the second
 * is over); a long line is cut, an unfinished one said when the NF's pipe
 * ends; a slot opened again says the last process's words first.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nflog.h"

#include "check.h"

#define SEC 1000000000ull

/* What nflog wrote so far, read from @p fd (non-blocking), appended to @p out. */
static void
collect(int fd, char *out, size_t len)
{
	size_t have = strlen(out);
	ssize_t n;

	while (have + 1 < len && (n = read(fd, out + have, len - 1 - have)) > 0)
		have += (size_t)n;
	out[have] = '\0';
}

static unsigned int
count(const char *s, const char *needle)
{
	unsigned int n = 0;

	for (const char *p = strstr(s, needle); p != NULL; p = strstr(p + 1, needle))
		n++;
	return n;
}

int
main(void)
{
	static char out[1 << 20];
	struct mgr_nflog l;
	int sink[2], w;
	char line[64];

	CHECK(pipe2(sink, O_NONBLOCK) == 0);
	CHECK(mgr_nflog_init(&l, 4, sink[1]) == 0);

	/* whole lines behind the name; a line in two writes is one line */
	w = mgr_nflog_open(&l, 2, "fw#0");
	CHECK(w >= 0);
	CHECK(write(w, "hello\nwor", 9) == 9);
	mgr_nflog_poll(&l, 1 * SEC);
	CHECK(write(w, "ld\n", 3) == 3);
	mgr_nflog_poll(&l, 1 * SEC);
	collect(sink[0], out, sizeof(out));
	CHECK(strcmp(out, "fw#0: hello\nfw#0: world\n") == 0);

	/* the rate: 100 said, the rest counted, then said once a second on */
	out[0] = '\0';
	for (int i = 0; i < 150; i++) {
		int n = snprintf(line, sizeof(line), "line %d\n", i);

		CHECK(write(w, line, (size_t)n) == n);
	}
	for (int i = 0; i < 10; i++)
		mgr_nflog_poll(&l, 3 * SEC);
	collect(sink[0], out, sizeof(out));
	/* (a new second began at 3 s: the first two lines were said at 1 s) */
	CHECK(count(out, "fw#0: line ") == NFLOG_LINES_PER_S);
	CHECK(mgr_nflog_suppressed(&l, 2) == 150 - NFLOG_LINES_PER_S);
	out[0] = '\0';
	CHECK(write(w, "later\n", 6) == 6);
	mgr_nflog_poll(&l, 5 * SEC);
	collect(sink[0], out, sizeof(out));
	CHECK(count(out, "more lines not shown") == 1);
	CHECK(count(out, "fw#0: later\n") == 1);

	/* a long line is cut into lines of NFLOG_LINE_BYTES */
	out[0] = '\0';
	{
		char big[NFLOG_LINE_BYTES * 2 + 1];

		memset(big, 'x', sizeof(big) - 1);
		big[sizeof(big) - 1] = '\n';
		CHECK(write(w, big, sizeof(big)) == (ssize_t)sizeof(big));
	}
	mgr_nflog_poll(&l, 5 * SEC);
	collect(sink[0], out, sizeof(out));
	CHECK(count(out, "fw#0: x") == 2);

	/* the NF gone: its unfinished line said; the slot opened again for
	 * the next process says what was left first */
	out[0] = '\0';
	CHECK(write(w, "last words", 10) == 10);
	close(w);
	w = mgr_nflog_open(&l, 2, "fw#0");
	collect(sink[0], out, sizeof(out));
	CHECK(strcmp(out, "fw#0: last words\n") == 0);

	/* another slot's lines carry its own name; the end drains them */
	out[0] = '\0';
	{
		int w3 = mgr_nflog_open(&l, 3, "nat#1");

		CHECK(write(w3, "bye\n", 4) == 4);
		close(w3);
	}
	mgr_nflog_drain(&l, 6 * SEC);
	collect(sink[0], out, sizeof(out));
	CHECK(strcmp(out, "nat#1: bye\n") == 0);
	CHECK(mgr_nflog_open(&l, 4, "x") < 0); /* (no such slot) */

	close(w);
	mgr_nflog_free(&l);
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
