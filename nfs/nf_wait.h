/* SPDX-License-Identifier: BSD-3-Clause
 * A per-packet time an NF spends waiting, not computing: what an NF that
 * hands each packet to a device (a crypto card, a remote lookup) and waits
 * for it looks like to the platform. The handler owes wait_ns per packet
 * and sleeps the debt off once it reaches a slice, so the instance takes at
 * most 1e9 / wait_ns packets a second and leaves the core to others while
 * it waits: on a machine with fewer cores than instances, instances still
 * add capacity, as they would with a core each (the scaler's experiments).
 */
#ifndef SQUALL_NFS_NF_WAIT_H
#define SQUALL_NFS_NF_WAIT_H

#include <stdint.h>
#include <sys/prctl.h>
#include <time.h>

/* Sleep in slices of at least this: shorter sleeps cost more in wake-ups
 * than they wait. */
#define NF_WAIT_SLICE_NS 50000

struct nf_wait {
	uint64_t wait_ns; /* per packet; 0: none */
	int64_t owed_ns;  /* slept too long: negative, paid by later packets */
};

static inline uint64_t
nf_wait_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Once, before the loop: the kernel's default 50 us timer slack would add
 * to every slice. */
static inline void
nf_wait_init(struct nf_wait *w, uint64_t wait_ns)
{
	w->wait_ns = wait_ns;
	w->owed_ns = 0;
	if (wait_ns > 0)
		prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
}

/* One packet's wait; what a slice oversleeps counts against the next ones,
 * so the rate holds on average whatever the kernel's timer does. */
static inline void
nf_wait_pkt(struct nf_wait *w)
{
	uint64_t t0;
	struct timespec ts;

	if (w->wait_ns == 0)
		return;
	w->owed_ns += (int64_t)w->wait_ns;
	if (w->owed_ns < NF_WAIT_SLICE_NS)
		return;
	ts.tv_sec = (time_t)(w->owed_ns / 1000000000);
	ts.tv_nsec = (long)(w->owed_ns % 1000000000);
	t0 = nf_wait_now_ns();
	nanosleep(&ts, NULL);
	w->owed_ns -= (int64_t)(nf_wait_now_ns() - t0);
	/* a descheduled sleep repays a millisecond at most: no free burst */
	if (w->owed_ns < -1000000)
		w->owed_ns = -1000000;
}

#endif
