#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Test hosts for Squall: two network namespaces whose only path to each other
# is through the manager's ports in the root namespace.
#
#   ns client: sq-c0 10.77.0.1/24 02:00:00:00:00:01 <-veth-> sq-c1 (root ns, no IP)
#   ns server: sq-s0 10.77.0.2/24 02:00:00:00:00:02 <-veth-> sq-s1 (root ns, no IP)
#
#   scripts/netns.sh up       (re)create both; starts from a clean state
#   scripts/netns.sh down     remove everything; no error if already gone
#   scripts/netns.sh status   show what exists
#
# Another set of the same shape, e.g. for a long benchmark that must not
# take the namespaces the tests use (the defaults are the values above):
#   SQUALL_NETNS_CLIENT=sqsoak-c SQUALL_NETNS_SERVER=sqsoak-s \
#   SQUALL_NETNS_DEV=sqk SQUALL_NETNS_NET=10.78.0 scripts/netns.sh up
# makes ns sqsoak-c (sqk-c0 10.78.0.1) and sqsoak-s (sqk-s0 10.78.0.2)
# with root ends sqk-c1 and sqk-s1.
#
# Offloads are off on all four ends (the manager would otherwise see 64 KB GSO
# frames and packets with partial checksums), and IPv6 is off so no router
# solicitations or DAD probes add noise to packet counts.
set -euo pipefail

CLIENT_NS=${SQUALL_NETNS_CLIENT:-client}
SERVER_NS=${SQUALL_NETNS_SERVER:-server}
DEV=${SQUALL_NETNS_DEV:-sq}    # devices DEV-c0, DEV-c1, DEV-s0, DEV-s1 (<= 12 chars)
NET=${SQUALL_NETNS_NET:-10.77.0} # a /24: client .1, server .2
# name of ns, ns-side dev, root-side dev, address, MAC
HOSTS=(
	"$CLIENT_NS $DEV-c0 $DEV-c1 $NET.1/24 02:00:00:00:00:01"
	"$SERVER_NS $DEV-s0 $DEV-s1 $NET.2/24 02:00:00:00:00:02"
)
MTU=1500
OFFLOADS=(tx tso gso gro rx)

die() {
	printf 'netns.sh: error: %s\n' "$*" >&2
	exit 1
}

usage() {
	sed -n '4,19s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
}

ns_exists() { ip netns list 2>/dev/null | awk '{print $1}' | grep -qxF -- "$1"; }
link_exists() { ip link show dev "$1" >/dev/null 2>&1; }

# One ethtool call per feature: veth refuses some of them on some kernels, and
# one refusal must not leave the others on.
offloads_off() {
	local dev=$1 ns=${2:-} f
	local exec=()
	[[ -n $ns ]] && exec=(ip netns exec "$ns")
	for f in "${OFFLOADS[@]}"; do
		"${exec[@]}" ethtool -K "$dev" "$f" off >/dev/null 2>&1 || true
	done
}

ipv6_off() {
	local dev=$1 ns=${2:-}
	local exec=()
	[[ -n $ns ]] && exec=(ip netns exec "$ns")
	"${exec[@]}" sysctl -qw "net.ipv6.conf.$dev.disable_ipv6=1" >/dev/null 2>&1 || true
}

host_up() {
	local ns=$1 dev=$2 peer=$3 addr=$4 mac=$5
	ip netns add "$ns"
	ip -n "$ns" link set lo up
	# Each namespace has its own sysctls; nothing in it should speak IPv6.
	ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 >/dev/null 2>&1 || true
	ip netns exec "$ns" sysctl -qw net.ipv6.conf.default.disable_ipv6=1 >/dev/null 2>&1 || true

	# One queue per end: veth delivers to the rx queue numbered like the
	# sender's tx queue, and the manager's af_xdp port binds queue 0 only.
	ip link add "$peer" numtxqueues 1 numrxqueues 1 type veth \
		peer name "$dev" numtxqueues 1 numrxqueues 1 netns "$ns"
	ipv6_off "$peer"
	ipv6_off "$dev" "$ns"

	ip -n "$ns" link set dev "$dev" address "$mac" mtu "$MTU"
	ip link set dev "$peer" mtu "$MTU"
	offloads_off "$dev" "$ns"
	offloads_off "$peer"

	ip -n "$ns" addr add "$addr" dev "$dev"
	ip -n "$ns" link set dev "$dev" up
	ip link set dev "$peer" up
	printf '    %s: %s %s %s <-> %s (root ns)\n' "$ns" "$dev" "$addr" "$mac" "$peer"
}

# Stop what still runs inside a namespace (e.g. a web server left behind by a
# crashed demo): while a process holds it, the namespace and its veth live on.
ns_kill_pids() {
	local ns=$1 pids i
	pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
	[[ -z ${pids// /} ]] && return 0
	printf '    %s: stopping pids %s\n' "$ns" "$pids"
	# shellcheck disable=SC2086
	kill -TERM $pids 2>/dev/null || true
	for ((i = 0; i < 20; i++)); do
		pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
		[[ -z ${pids// /} ]] && return 0
		sleep 0.1
	done
	# shellcheck disable=SC2086
	kill -KILL $pids 2>/dev/null || true
}

cmd_down() {
	local h ns dev peer
	for h in "${HOSTS[@]}"; do
		read -r ns dev peer _ <<<"$h"
		if ns_exists "$ns"; then
			ns_kill_pids "$ns"
			ip netns del "$ns" 2>/dev/null || true
		fi
		# Deleting one end of a veth deletes both; the root end also covers a
		# namespace that was removed while something still held it.
		if link_exists "$peer"; then
			ip link del dev "$peer" 2>/dev/null || true
		fi
		if link_exists "$dev"; then
			ip link del dev "$dev" 2>/dev/null || true
		fi
	done
	for h in "${HOSTS[@]}"; do
		read -r ns dev peer _ <<<"$h"
		! ns_exists "$ns" || die "namespace $ns still exists"
		! link_exists "$peer" || die "link $peer still exists"
	done
	echo "==> netns down"
}

cmd_up() {
	cmd_down >/dev/null
	echo "==> netns up"
	local h
	for h in "${HOSTS[@]}"; do
		# shellcheck disable=SC2086
		host_up $h
	done
}

cmd_status() {
	local h ns dev peer
	for h in "${HOSTS[@]}"; do
		read -r ns dev peer _ <<<"$h"
		if ns_exists "$ns"; then
			echo "ns $ns:"
			ip -n "$ns" -br addr show dev "$dev" 2>/dev/null | sed 's/^/    /' || echo "    ($dev missing)"
		else
			echo "ns $ns: absent"
		fi
		if link_exists "$peer"; then
			ip -br link show dev "$peer" | sed 's/^/    /'
		else
			echo "    $peer: absent"
		fi
	done
}

[[ ${#DEV} -le 12 ]] || die "SQUALL_NETNS_DEV=$DEV: at most 12 characters (device names)"
[[ $EUID -eq 0 ]] || die "run as root"
command -v ip >/dev/null || die "ip (iproute2) not found; run scripts/setup.sh"

case ${1:-} in
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
-h | --help) usage ;;
*)
	usage >&2
	exit 2
	;;
esac
