/* SPDX-License-Identifier: BSD-3-Clause
 * nflog: NFs' stdout and stderr, a pipe each, said by the manager (nflog.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "nflog.h"

#define NAME_BYTES 40
/* Read per NF and call: a chatty NF waits for the next call. */
#define READ_BYTES 4096
#define EVENTS     64
/* Read of a pipe whose NF is gone: what a pipe holds (a child the NF left
 * behind could write on for ever). */
#define LAST_BYTES (64 * 1024)

static inline size_t
min_sz(size_t a, size_t b)
{
	return a < b ? a : b;
}

struct nflog_slot {
	int fd; /* the read end; -1: none */
	char name[NAME_BYTES];
	uint16_t len; /* bytes of an unfinished line in buf */
	char buf[NFLOG_LINE_BYTES];
	uint64_t window_ns; /* the start of this second */
	uint32_t said;      /* lines said in it */
	uint32_t held;      /* lines counted, not said, in it */
	uint64_t suppressed;
};

int
mgr_nflog_init(struct mgr_nflog *l, uint32_t n_slots, int out_fd)
{
	*l = (struct mgr_nflog){.epfd = -1, .out_fd = out_fd, .n_slots = n_slots};
	l->slots = calloc(n_slots, sizeof(*l->slots));
	if (l->slots == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < n_slots; i++)
		l->slots[i].fd = -1;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		int ret = -errno;

		mgr_nflog_free(l);
		return ret;
	}
	return 0;
}

static void
emit(struct mgr_nflog *l, struct nflog_slot *s, const char *line, size_t len, uint64_t now_ns)
{
	char out[NAME_BYTES + NFLOG_LINE_BYTES + 64];
	int n;

	if (now_ns - s->window_ns >= 1000000000ull) {
		if (s->held != 0) {
			n = snprintf(out, sizeof(out),
				     "%s: (%u more lines not shown: %u a second)\n", s->name,
				     s->held, NFLOG_LINES_PER_S);
			if (write(l->out_fd, out, (size_t)n) < 0) { /* (nowhere to say it) */
			}
		}
		s->window_ns = now_ns;
		s->said = 0;
		s->held = 0;
	}
	if (s->said >= NFLOG_LINES_PER_S) {
		s->held++;
		s->suppressed++;
		return;
	}
	s->said++;
	n = snprintf(out, sizeof(out), "%s: %.*s\n", s->name, (int)len, line);
	if (n > 0 && write(l->out_fd, out, min_sz((size_t)n, sizeof(out) - 1)) < 0) {
	}
}

/* Lines of @p data, with the slot's unfinished one first. */
static void
take(struct mgr_nflog *l, struct nflog_slot *s, const char *data, size_t n, uint64_t now_ns)
{
	for (size_t i = 0; i < n; i++) {
		if (data[i] != '\n')
			s->buf[s->len++] = data[i];
		if (data[i] == '\n' || s->len == sizeof(s->buf)) {
			emit(l, s, s->buf, s->len, now_ns);
			s->len = 0;
		}
	}
}

static void
close_slot(struct mgr_nflog *l, struct nflog_slot *s, uint64_t now_ns)
{
	if (s->len != 0) {
		emit(l, s, s->buf, s->len, now_ns);
		s->len = 0;
	}
	if (s->fd >= 0) {
		epoll_ctl(l->epfd, EPOLL_CTL_DEL, s->fd, NULL);
		close(s->fd);
		s->fd = -1;
	}
}

/* Read up to @p budget bytes of slot @p s; at its end (every writer gone,
 * the pipe empty) close it. */
static void
read_slot(struct mgr_nflog *l, struct nflog_slot *s, size_t budget, uint64_t now_ns)
{
	char data[READ_BYTES];

	while (s->fd >= 0 && budget > 0) {
		ssize_t n = read(s->fd, data, min_sz(sizeof(data), budget));

		if (n > 0) {
			take(l, s, data, (size_t)n, now_ns);
			budget -= (size_t)n;
		} else if (n == 0 || errno != EINTR) {
			if (n == 0 || errno != EAGAIN)
				close_slot(l, s, now_ns);
			return;
		}
	}
}

int
mgr_nflog_open(struct mgr_nflog *l, uint32_t slot, const char *name)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.u32 = slot};
	struct nflog_slot *s;
	int p[2];

	if (slot >= l->n_slots)
		return -EINVAL;
	s = &l->slots[slot];
	read_slot(l, s, LAST_BYTES, s->window_ns);
	close_slot(l, s, s->window_ns);
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	if (fcntl(p[0], F_SETFL, O_NONBLOCK) < 0 ||
	    epoll_ctl(l->epfd, EPOLL_CTL_ADD, p[0], &ev) < 0) {
		int ret = -errno;

		close(p[0]);
		close(p[1]);
		return ret;
	}
	s->fd = p[0];
	snprintf(s->name, sizeof(s->name), "%s", name);
	return p[1];
}

void
mgr_nflog_poll(struct mgr_nflog *l, uint64_t now_ns)
{
	struct epoll_event ev[EVENTS];
	int n = epoll_wait(l->epfd, ev, EVENTS, 0);

	for (int i = 0; i < n; i++)
		if (ev[i].data.u32 < l->n_slots)
			read_slot(l, &l->slots[ev[i].data.u32], READ_BYTES, now_ns);
}

void
mgr_nflog_drain(struct mgr_nflog *l, uint64_t now_ns)
{
	for (uint32_t i = 0; i < l->n_slots; i++)
		if (l->slots[i].fd >= 0)
			read_slot(l, &l->slots[i], LAST_BYTES, now_ns);
}

uint64_t
mgr_nflog_suppressed(const struct mgr_nflog *l, uint32_t slot)
{
	return slot < l->n_slots ? l->slots[slot].suppressed : 0;
}

void
mgr_nflog_free(struct mgr_nflog *l)
{
	if (l->slots != NULL)
		for (uint32_t i = 0; i < l->n_slots; i++)
			if (l->slots[i].fd >= 0)
				close(l->slots[i].fd);
	if (l->epfd >= 0)
		close(l->epfd);
	free(l->slots);
	l->slots = NULL;
	l->epfd = -1;
}
