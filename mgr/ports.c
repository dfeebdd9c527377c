/* SPDX-License-Identifier: BSD-3-Clause
 * Ports: probe each configured device from its devargs (the first alternative
 * that DPDK accepts and starts wins), one rx and one tx queue each, mbufs from
 * the region's pool.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/if_packet.h>
#include <linux/if_xdp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_ethdev.h>
#include <rte_pci.h>

#include "mgr.h"

/* The device name DPDK gives a port: devargs up to the first comma. */
static void
devargs_name(const char *devargs, char *name, size_t len)
{
	size_t n = strcspn(devargs, ",");

	if (n >= len)
		n = len - 1;
	memcpy(name, devargs, n);
	name[n] = '\0';
}

static bool
is_vdev(const char *name)
{
	return strncmp(name, "net_", 4) == 0 || strncmp(name, "eth_", 4) == 0;
}

/* A NIC given by its PCI address ("0000:01:00.0" or "01:00.0", then any
 * driver arguments after a comma). */
static bool
is_pci(const char *devargs)
{
	char name[RTE_DEV_NAME_MAX_LEN];
	struct rte_pci_addr addr;

	devargs_name(devargs, name, sizeof(name));
	return rte_pci_addr_parse(name, &addr) == 0;
}

/* EAL's PCI arguments. Without a PCI port, --no-pci: EAL then neither scans
 * nor takes any NIC. With one, an allow-list of exactly the configured NICs
 * (with their driver arguments), probed by EAL at start: nothing else on
 * the bus is touched. @return the new argument count. */
int
mgr_ports_eal_args(const struct sq_config *cfg, char **args, int n, int max)
{
	bool pci = false;

	for (uint16_t p = 0; p < cfg->n_ports; p++)
		for (uint16_t a = 0; a < cfg->ports[p].n_devargs; a++) {
			char *devargs = (char *)(uintptr_t)cfg->ports[p].devargs[a];

			if (!is_pci(devargs) || n + 2 > max)
				continue;
			args[n++] = "-a";
			args[n++] = devargs;
			pci = true;
		}
	if (!pci && n < max)
		args[n++] = "--no-pci";
	return n;
}

static void
unprobe(const char *devargs)
{
	char name[RTE_DEV_NAME_MAX_LEN];

	devargs_name(devargs, name, sizeof(name));
	rte_eal_hotplug_remove(is_vdev(name) ? "vdev" : "pci", name);
}

/* @p rx_intr: ask for queue 0's rx interrupt, which the manager waits for
 * when idle (mgr/idle.h); PMDs without one (af_xdp, af_packet, pcap, null
 * and ring in DPDK 22.11) ignore it, one that refuses is set up again without. */
static int
setup_queues(struct mgr *mgr, uint16_t port_id, const struct sq_cfg_port *cp, bool rx_intr)
{
	struct rte_eth_conf conf = {.intr_conf.rxq = rx_intr};
	uint16_t rx_desc = cp->rx_desc, tx_desc = cp->tx_desc;
	int ret;

	ret = rte_eth_dev_configure(port_id, 1, 1, &conf);
	if (ret < 0)
		return ret;
	ret = rte_eth_dev_adjust_nb_rx_tx_desc(port_id, &rx_desc, &tx_desc);
	if (ret < 0)
		return ret;
	ret = rte_eth_rx_queue_setup(port_id, 0, rx_desc, rte_eth_dev_socket_id(port_id), NULL,
				     mgr->pool);
	if (ret < 0)
		return ret;
	ret = rte_eth_tx_queue_setup(port_id, 0, tx_desc, rte_eth_dev_socket_id(port_id), NULL);
	if (ret < 0)
		return ret;
	return rte_eth_dev_start(port_id);
}

#ifndef AF_XDP
#define AF_XDP 44
#endif
/* fds from this one up are not looked at (a manager has a few dozen when
 * it sets its ports up; a socket past it costs only the timed sleep) */
#define SOCK_FDS_MAX 4096

/* The fds of this process that are AF_XDP or AF_PACKET sockets, as a bitmap. */
static void
packet_sockets(uint64_t set[SOCK_FDS_MAX / 64])
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;

	memset(set, 0, SOCK_FDS_MAX / 8);
	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		int fd = atoi(e->d_name), domain;
		socklen_t len = sizeof(domain);

		if (e->d_name[0] == '.' || fd < 0 || fd >= SOCK_FDS_MAX || fd == dirfd(d) ||
		    getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0)
			continue;
		if (domain == AF_XDP || domain == AF_PACKET)
			set[fd / 64] |= 1ull << (fd % 64);
	}
	closedir(d);
}

/* The socket a port's PMD reads (af_xdp's XDP socket, af_packet's packet
 * socket), or -1: the one that appeared while the port was probed and set
 * up. DPDK 22.11 gives these PMDs no rx interrupt, but the kernel marks the
 * socket readable while a frame waits in its rx ring, so the idle manager
 * can wait on it (mgr/idle.c). AF_XDP sockets cannot say which interface
 * they are bound to (no getsockname), hence the before and after. */
static int
new_packet_socket(const uint64_t before[SOCK_FDS_MAX / 64])
{
	uint64_t after[SOCK_FDS_MAX / 64];
	int found = -1;

	packet_sockets(after);
	for (int w = 0; w < SOCK_FDS_MAX / 64; w++) {
		uint64_t fresh = after[w] & ~before[w];

		if (fresh == 0)
			continue;
		if (found >= 0 || (fresh & (fresh - 1)) != 0)
			return -1; /* more than one: which is rx is not ours to guess */
		found = w * 64 + __builtin_ctzll(fresh);
	}
	return found;
}

static int
socket_domain(int fd)
{
	int domain = 0;
	socklen_t len = sizeof(domain);

	if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0)
		return 0;
	return domain;
}

/* Is @p key (as "key=") one of the arguments after the device name? Its
 * value into @p buf (@p len bytes, cut short if longer) if @p buf is given. */
static bool
devargs_value(const char *devargs, const char *key, char *buf, size_t len)
{
	size_t n = strlen(key);

	for (const char *a = strchr(devargs, ','); a != NULL; a = strchr(a + 1, ','))
		if (strncmp(a + 1, key, n) == 0 && a[1 + n] == '=') {
			const char *v = a + 2 + n;

			if (buf != NULL)
				snprintf(buf, len, "%.*s", (int)strcspn(v, ","), v);
			return true;
		}
	return false;
}

static bool
devargs_has(const char *devargs, const char *key)
{
	return devargs_value(devargs, key, NULL, 0);
}

/* DPDK's pcap PMD reads its rx_pcap with blocking reads on the lcore that
 * polls every port: a FIFO (a live capture piped in) stops them all while
 * it is empty, and its open, at the probe, waits for a writer. Said before
 * the probe, which may be where it waits. */
static void
warn_pcap_fifo(const struct sq_cfg_port *cp, const char *devargs)
{
	char path[SQ_CFG_DEVARGS_LEN];
	struct stat st;

	if (devargs_value(devargs, "rx_pcap", path, sizeof(path)) && stat(path, &st) == 0 &&
	    S_ISFIFO(st.st_mode))
		MGR_LOG(WARNING,
			"port %s: rx_pcap %s is a FIFO: DPDK reads it blocking, so while it is "
			"open and empty no port moves packets (docs/config.md)\n",
			cp->name, path);
}

/* af_packet's default frame size; its blocks are a page each */
#define AF_PACKET_FRAME_BYTES 2048u

/* af_packet takes its ring size from its devargs (framecnt, 512 frames by
 * default), not from the queue setup's descriptor count, which it ignores:
 * the port's rx_desc would size nothing. Unless the devargs shape the ring
 * themselves, rx_desc becomes framecnt: one count for its rx and its tx
 * ring, rounded up to whole blocks (a page holds two 2 KiB frames on x86,
 * 32 with 64 KiB pages; the kernel takes no partial block). @return the
 * devargs to probe: @p devargs or @p buf. */
static const char *
sized_devargs(const struct sq_cfg_port *cp, const char *devargs, char *buf, size_t len)
{
	unsigned int per_block = (unsigned int)getpagesize() / AF_PACKET_FRAME_BYTES;
	char name[RTE_DEV_NAME_MAX_LEN];
	unsigned int frames;
	int n;

	devargs_name(devargs, name, sizeof(name));
	if ((strncmp(name, "net_af_packet", 13) != 0 && strncmp(name, "eth_af_packet", 13) != 0) ||
	    devargs_has(devargs, "framecnt") || devargs_has(devargs, "blocksz") ||
	    devargs_has(devargs, "framesz"))
		return devargs;
	per_block = RTE_MAX(per_block, 1u);
	frames = (cp->rx_desc + per_block - 1) / per_block * per_block;
	n = snprintf(buf, len, "%s,framecnt=%u", devargs, frames);
	return n > 0 && (size_t)n < len ? buf : devargs;
}

/* Probe, configure and start one devargs alternative, as DPDK is to be
 * given it (sized_devargs). */
static int
try_devargs(struct mgr *mgr, const struct sq_cfg_port *cp, const char *devargs, uint16_t *port_id,
	    int *rx_sock_fd)
{
	uint64_t sockets[SOCK_FDS_MAX / 64];
	char name[RTE_DEV_NAME_MAX_LEN];
	int ret;

	packet_sockets(sockets);
	devargs_name(devargs, name, sizeof(name));
	/* A NIC on EAL's allow-list was probed at start (mgr_ports_eal_args);
	 * one that is absent, or bound to no DPDK driver, was not: probing it
	 * again says why. */
	if (!is_pci(devargs) || rte_eth_dev_get_port_by_name(name, port_id) < 0) {
		ret = rte_dev_probe(devargs);
		if (ret < 0)
			return ret;
		ret = rte_eth_dev_get_port_by_name(name, port_id);
		if (ret < 0)
			goto out_unprobe;
	}
	ret = setup_queues(mgr, *port_id, cp, true);
	if (ret < 0)
		ret = setup_queues(mgr, *port_id, cp, false);
	if (ret < 0) {
		rte_eth_dev_close(*port_id);
		goto out_unprobe;
	}
	/* A bump in the wire forwards frames that are not addressed to it. */
	ret = rte_eth_promiscuous_enable(*port_id);
	if (ret < 0 && ret != -ENOTSUP)
		MGR_LOG(WARNING, "port %s: promiscuous mode: %s\n", cp->name, strerror(-ret));
	*rx_sock_fd = new_packet_socket(sockets);
	return 0;

out_unprobe:
	unprobe(devargs);
	return ret;
}

/* try_devargs, and when DPDK refused what the manager added to the devargs,
 * the string it was given (the error names the configured one). */
static int
try_port(struct mgr *mgr, const struct sq_cfg_port *cp, const char *devargs, uint16_t *port_id,
	 int *rx_sock_fd)
{
	char sized[SQ_CFG_DEVARGS_LEN + 32];
	const char *given = sized_devargs(cp, devargs, sized, sizeof(sized));
	int ret;

	warn_pcap_fifo(cp, devargs);
	ret = try_devargs(mgr, cp, given, port_id, rx_sock_fd);

	if (ret < 0 && given == sized)
		MGR_LOG(WARNING, "port %s: DPDK was given \"%s\" (framecnt: rx_desc)\n", cp->name,
			sized);
	return ret;
}

static int
init_port(struct mgr *mgr, uint16_t idx, char *err, size_t err_len)
{
	const struct sq_cfg_port *cp = &mgr->cfg->ports[idx];
	struct mgr_port *port = &mgr->ports[idx];
	int ret = -EINVAL;

	port->rx_sock_fd = -1;
	for (uint16_t a = 0; a < cp->n_devargs; a++) {
		ret = try_port(mgr, cp, cp->devargs[a], &port->port_id, &port->rx_sock_fd);
		if (ret == 0) {
			port->rx_sock_domain = socket_domain(port->rx_sock_fd);
			snprintf(port->name, sizeof(port->name), "%s", cp->name);
			snprintf(port->devargs, sizeof(port->devargs), "%s", cp->devargs[a]);
			if (a > 0)
				MGR_LOG(WARNING, "port %s: using fallback \"%s\"\n", cp->name,
					cp->devargs[a]);
			MGR_LOG(NOTICE, "port %s: %s (port %u)\n", cp->name, cp->devargs[a],
				port->port_id);
			return 0;
		}
		MGR_LOG(WARNING, "port %s: \"%s\" failed: %s\n", cp->name, cp->devargs[a],
			strerror(-ret));
	}
	snprintf(err, err_len, "%s:%d: ports[%u].devargs: DPDK rejected \"%s\"%s: %s",
		 mgr->cfg->path, cp->line, idx, cp->devargs[cp->n_devargs - 1],
		 cp->n_devargs > 1 ? " and every alternative before it" : "", strerror(-ret));
	return ret;
}

int
mgr_ports_init(struct mgr *mgr, char *err, size_t err_len)
{
	int ret;

	for (uint16_t i = 0; i < mgr->cfg->n_ports; i++) {
		ret = init_port(mgr, i, err, err_len);
		if (ret < 0)
			return ret;
		mgr->n_ports++;
		snprintf(mgr->region->port_names[i], SQ_NAME_LEN, "%s", mgr->ports[i].name);
	}
	mgr->region->n_ports = mgr->n_ports;
	return 0;
}

/* Frames the kernel dropped before the PMD saw them, which DPDK 22.11's
 * PMDs do not count: af_packet's ring full (PACKET_STATISTICS, which the
 * kernel resets at each read: added up here), and af_xdp's rx ring full or
 * a bad descriptor (XDP_STATISTICS, running totals; the PMD counts only its
 * rx_dropped, a fill ring found empty, into imissed). Telemetry and the
 * exit stats read it; the last read before the socket closes stays. */
uint64_t
mgr_port_kernel_drops(const struct mgr_port *p)
{
	/* (a reader's view of the port, but the sum is this function's own) */
	_Atomic uint64_t *sum = (_Atomic uint64_t *)(uintptr_t)&p->kernel_drops;
	struct tpacket_stats st;
	struct xdp_statistics xs;
	socklen_t len;

	if (p->closed)
		return atomic_load(sum);
	len = sizeof(st);
	if (p->rx_sock_domain == AF_PACKET &&
	    getsockopt(p->rx_sock_fd, SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0)
		atomic_fetch_add(sum, st.tp_drops);
	len = sizeof(xs);
	if (p->rx_sock_domain == AF_XDP &&
	    getsockopt(p->rx_sock_fd, SOL_XDP, XDP_STATISTICS, &xs, &len) == 0 && len == sizeof(xs))
		atomic_store(sum, xs.rx_ring_full + xs.rx_invalid_descs);
	return atomic_load(sum);
}

void
mgr_ports_close(struct mgr *mgr)
{
	for (uint16_t i = 0; i < mgr->n_ports; i++) {
		mgr_port_kernel_drops(&mgr->ports[i]); /* (before its socket closes) */
		rte_eth_stats_get(mgr->ports[i].port_id, &mgr->ports[i].eth_final);
		/* Free mbufs whose transmission completed but which the PMD still
		 * holds, or they look leaked: tx_done_cleanup where the PMD has it,
		 * and an empty burst, which makes af_xdp pull its completion ring. */
		rte_eth_tx_done_cleanup(mgr->ports[i].port_id, 0, 0);
		for (int k = 0; k < 4; k++)
			rte_eth_tx_burst(mgr->ports[i].port_id, 0, NULL, 0);
		mgr->ports[i].closed = true;
		rte_eth_dev_stop(mgr->ports[i].port_id);
		/* close flushes what net_pcap buffered for its tx_pcap */
		rte_eth_dev_close(mgr->ports[i].port_id);
	}
}
