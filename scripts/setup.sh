#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# One idempotent setup for Squall on Debian 12: system packages, hugepages,
# the NF user, the Python venv, and (with --build) the C build. Safe to run on every
# `make test`: a second run only checks and prints.
#
#   scripts/setup.sh            packages + hugepages + venv
#   scripts/setup.sh --build    the same, then meson setup (if needed) + ninja
#
# Environment:
#   SQUALL_HUGEPAGES   2 MiB pages wanted (default 1024 = 2 GiB)
#   SQUALL_SKIP_APT=1  do not touch system packages (e.g. on a hand-made box)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

HUGEPAGES_WANTED=${SQUALL_HUGEPAGES:-1024}
HUGEPAGE_DIR=/dev/hugepages
VENV=.venv
BUILD_DIR=build

# Needed to build and test; a missing one is fatal. prometheus (and promtool),
# chromium and chromium-driver: the exporter and dashboard tests
# (test_exporter.py, test_dashboard.py) run them, as a user would. clang and
# its runtimes: the libFuzzer targets (tests/fuzz); libasan8/libubsan1: gcc's
# sanitizer build (make asan); llvm: llvm-symbolizer for readable sanitizer
# reports. tshark reads the captures' pcapng; libssl-dev (libcrypto) for the
# aes NF, libvectorscan-dev for the dpi NF; libseccomp-dev for the manager's
# NF sandbox (mgr/sandbox.c).
REQUIRED_PKGS=(
	libdpdk-dev dpdk dpdk-dev meson ninja-build pkg-config gcc
	libyaml-dev libpcap-dev libbpf-dev libxdp-dev
	iproute2 iputils-ping ethtool curl procps python3-venv clang-format make
	apache2-utils tcpdump libssl-dev tshark libvectorscan-dev libseccomp-dev
	prometheus chromium chromium-driver
	clang libclang-rt-14-dev llvm libasan8 libubsan1
)
# Traffic and developer tools (DESIGN.md §10); missing from the archive = a warning.
# Peers for side-by-side benchmarks (python/squall/bench/peers): nftables for
# the kernel nft chain, Open vSwitch with DPDK (userspace datapath); perf for
# tcp_peers's split of the forwarding core (python/squall/bench/profile.py).
OPTIONAL_PKGS=(nginx-light wrk iperf3 nftables openvswitch-switch-dpdk linux-perf)

step() { printf '==> %s\n' "$*"; }
info() { printf '    %s\n' "$*"; }
warn() { printf 'setup.sh: warning: %s\n' "$*" >&2; }
die() {
	printf 'setup.sh: error: %s\n' "$*" >&2
	exit 1
}

usage() {
	sed -n '4,13s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
}

SUDO=()
if [[ $EUID -ne 0 ]]; then
	command -v sudo >/dev/null || die "run as root (or install sudo)"
	SUDO=(sudo -n)
fi
as_root() { "${SUDO[@]}" "$@"; }

# ---------------------------------------------------------------- packages

pkg_is_installed() {
	[[ $(dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null) == ii* ]]
}

pkg_has_candidate() {
	local cand
	cand=$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2}')
	[[ -n $cand && $cand != "(none)" ]]
}

# No service may start during install: nginx's postinst would otherwise bind
# port 80 in the root namespace, prometheus's port 9090 and its scrapes. policy-rc.d exit 101 = "action forbidden".
POLICY_RC=/usr/sbin/policy-rc.d
POLICY_RC_OURS=0
policy_rc_block() {
	if [[ ! -e $POLICY_RC ]]; then
		printf '#!/bin/sh\n# squall setup.sh: no services start during install\nexit 101\n' |
			as_root tee "$POLICY_RC" >/dev/null
		as_root chmod 755 "$POLICY_RC"
		POLICY_RC_OURS=1
	fi
}
policy_rc_restore() {
	if [[ $POLICY_RC_OURS -eq 1 ]]; then
		as_root rm -f "$POLICY_RC"
		POLICY_RC_OURS=0
	fi
}

# If nginx is installed and its service is running (an install before this
# script, or a box where policy-rc.d did not apply), stop and disable it so the
# demo and tests own port 80 and no stray server answers in the root namespace.
nginx_service_off() {
	pkg_is_installed nginx || return 0
	if command -v systemctl >/dev/null && [[ -d /run/systemd/system ]]; then
		as_root systemctl disable --now nginx >/dev/null 2>&1 || true
	else
		if [[ -s /run/nginx.pid ]] && kill -0 "$(cat /run/nginx.pid)" 2>/dev/null; then
			as_root /etc/init.d/nginx stop >/dev/null 2>&1 || true
		fi
		as_root update-rc.d nginx disable >/dev/null 2>&1 || true
	fi
}

# The same for Debian's prometheus service: the tests run their own
# prometheus on a free port; a system one would scrape and fill /var/lib.
prometheus_service_off() {
	pkg_is_installed prometheus || return 0
	if command -v systemctl >/dev/null && [[ -d /run/systemd/system ]]; then
		as_root systemctl disable --now prometheus >/dev/null 2>&1 || true
	else
		if pgrep -x -u prometheus prometheus >/dev/null 2>&1; then
			as_root /etc/init.d/prometheus stop >/dev/null 2>&1 || true
		fi
		as_root update-rc.d prometheus disable >/dev/null 2>&1 || true
	fi
}

install_packages() {
	step "system packages"
	if [[ ${SQUALL_SKIP_APT:-0} == 1 ]]; then
		info "SQUALL_SKIP_APT=1: skipped"
		return 0
	fi
	command -v apt-get >/dev/null || die "apt-get not found: this script targets Debian 12"

	local p missing_req=() missing_opt=()
	for p in "${REQUIRED_PKGS[@]}"; do
		pkg_is_installed "$p" || missing_req+=("$p")
	done
	for p in "${OPTIONAL_PKGS[@]}"; do
		pkg_is_installed "$p" || missing_opt+=("$p")
	done
	if [[ ${#missing_req[@]} -eq 0 && ${#missing_opt[@]} -eq 0 ]]; then
		info "all ${#REQUIRED_PKGS[@]}+${#OPTIONAL_PKGS[@]} packages installed"
		nginx_service_off
		prometheus_service_off
		return 0
	fi

	# tshark (wireshark-common) asks whether non-root users may capture:
	# no, and never ask (dumpcap stays root-only; squallctl capture needs
	# no dumpcap).
	if command -v debconf-set-selections >/dev/null; then
		echo "wireshark-common wireshark-common/install-setuid boolean false" |
			as_root debconf-set-selections || warn "debconf preseed for tshark failed"
	fi
	local apt=(env DEBIAN_FRONTEND=noninteractive apt-get -q -y
		-o DPkg::Lock::Timeout=300 -o Dpkg::Use-Pty=0
		-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
	local missing=("${missing_req[@]}" "${missing_opt[@]}")
	info "missing: ${missing[*]}"
	info "apt-get update"
	as_root "${apt[@]}" update >/dev/null || die "apt-get update failed"

	local installable=("${missing_req[@]}")
	for p in "${missing_opt[@]}"; do
		if pkg_has_candidate "$p"; then
			installable+=("$p")
		else
			warn "optional package $p is not in the archive; skipped"
		fi
	done
	for p in "${missing_req[@]}"; do
		pkg_has_candidate "$p" || die "required package $p is not in the archive (is this Debian 12?)"
	done

	info "apt-get install ${installable[*]}"
	policy_rc_block
	trap policy_rc_restore EXIT
	if ! as_root "${apt[@]}" install --no-install-recommends "${installable[@]}" >/tmp/squall-apt.log 2>&1; then
		tail -n 30 /tmp/squall-apt.log >&2
		die "apt-get install failed (full log: /tmp/squall-apt.log)"
	fi
	policy_rc_restore
	trap - EXIT
	nginx_service_off
	prometheus_service_off

	for p in "${missing_req[@]}"; do
		pkg_is_installed "$p" || die "package $p did not install"
	done
	info "installed ${#installable[@]} package(s)"
}

# ---------------------------------------------------------------- hugepages

hugepages_total() { cat /proc/sys/vm/nr_hugepages; }

setup_hugepages() {
	step "hugepages (want >= $HUGEPAGES_WANTED x 2 MiB)"
	local size_kb
	size_kb=$(awk '/^Hugepagesize:/ {print $2}' /proc/meminfo)
	[[ $size_kb == 2048 ]] || warn "default hugepage size is ${size_kb} kB, not 2048 kB"

	local have
	have=$(hugepages_total)
	if ((have < HUGEPAGES_WANTED)); then
		echo "$HUGEPAGES_WANTED" | as_root tee /proc/sys/vm/nr_hugepages >/dev/null ||
			warn "cannot write /proc/sys/vm/nr_hugepages"
		have=$(hugepages_total)
		if ((have < HUGEPAGES_WANTED)); then
			# Fragmented memory: free the page cache, compact, and ask again.
			sync
			echo 3 | as_root tee /proc/sys/vm/drop_caches >/dev/null 2>&1 || true
			echo 1 | as_root tee /proc/sys/vm/compact_memory >/dev/null 2>&1 || true
			echo "$HUGEPAGES_WANTED" | as_root tee /proc/sys/vm/nr_hugepages >/dev/null 2>&1 || true
			have=$(hugepages_total)
		fi
	fi
	local free
	free=$(awk '/^HugePages_Free:/ {print $2}' /proc/meminfo)
	info "kernel granted $have pages ($((have * size_kb / 1024)) MiB), $free free"
	if ((have == 0)); then
		warn "no hugepages: the manager falls back to /dev/shm (about 6x slower)"
	elif ((have < HUGEPAGES_WANTED)); then
		warn "only $have of $HUGEPAGES_WANTED hugepages granted"
	fi

	if awk -v d="$HUGEPAGE_DIR" '$2 == d && $3 == "hugetlbfs" {f = 1} END {exit !f}' /proc/mounts; then
		info "hugetlbfs mounted at $HUGEPAGE_DIR"
	else
		as_root mkdir -p "$HUGEPAGE_DIR"
		as_root mount -t hugetlbfs -o pagesize=2M nodev "$HUGEPAGE_DIR" ||
			die "cannot mount hugetlbfs at $HUGEPAGE_DIR"
		info "mounted hugetlbfs at $HUGEPAGE_DIR"
	fi
	remove_stale_regions
}

# Squall files on hugetlbfs and /dev/shm that no live process has open or
# mapped are left over from a crash; they pin hugepages, so remove them.
# Candidates: region files of managers before the region became an unlinked
# file (those pin hugepages), /dev/shm/squall-NAME.region symlinks into the
# /proc of a manager that is gone (they pin nothing; removed when dangling)
# and the EAL page files of a squall-* file prefix.
remove_stale_regions() {
	local candidates=() f
	shopt -s nullglob
	candidates=("$HUGEPAGE_DIR"/squall-*.region "$HUGEPAGE_DIR"/squall-*.region.* "$HUGEPAGE_DIR"/squall-*map_* /dev/shm/squall-*.region /dev/shm/squall-*.region.*)
	shopt -u nullglob
	if [[ ${#candidates[@]} -eq 0 ]]; then
		info "no stale region files"
		return 0
	fi
	local in_use
	in_use=$({
		find /proc/[0-9]*/fd -maxdepth 1 -type l -printf '%l\n' 2>/dev/null
		cat /proc/[0-9]*/maps 2>/dev/null | awk 'NF >= 6 {print $6}'
	} | grep -E '^/dev/(hugepages|shm)/squall-' | sort -u || true)
	local removed=0 kept=0
	for f in "${candidates[@]}"; do
		if [[ -L $f ]]; then
			if [[ -e $f ]]; then
				kept=$((kept + 1))
				continue
			fi
			as_root rm -f -- "$f"
			removed=$((removed + 1))
		elif grep -qxF -- "$f" <<<"$in_use"; then
			kept=$((kept + 1))
		else
			as_root rm -f -- "$f"
			removed=$((removed + 1))
		fi
	done
	info "stale region files: removed $removed, kept $kept in use"
}

# libxdp (DPDK's af_xdp ports) pins its XDP dispatcher in bpffs; without it
# every af_xdp port start logs "No bpffs found" and loses multi-program support.
setup_bpffs() {
	step "bpffs"
	if awk '$2 == "/sys/fs/bpf" && $3 == "bpf" {f = 1} END {exit !f}' /proc/mounts; then
		info "mounted at /sys/fs/bpf"
	elif as_root mount -t bpf bpf /sys/fs/bpf 2>/dev/null; then
		info "mounted bpffs at /sys/fs/bpf"
	else
		warn "cannot mount bpffs at /sys/fs/bpf; af_xdp ports still work, with a warning"
	fi
}

# The unprivileged user squall-mgr starts NFs as (manager.nf_user): a system
# user with no home, no login shell and a group of its own.
setup_nf_user() {
	step "NF user squall-nf"
	if getent passwd squall-nf >/dev/null; then
		info "exists: $(id squall-nf)"
	elif as_root useradd --system --user-group --no-create-home --home-dir /nonexistent \
		--shell /usr/sbin/nologin squall-nf; then
		info "made: $(id squall-nf)"
	else
		die "cannot add user squall-nf (NFs run as it; see docs/config.md nf_user)"
	fi
}

# ---------------------------------------------------------------- python

setup_venv() {
	step "python venv ($VENV)"
	local py=${PYTHON:-python3}
	command -v "$py" >/dev/null || die "$py not found"
	if [[ -x $VENV/bin/python ]] && "$VENV/bin/python" -c 'import sys' 2>/dev/null; then
		info "exists: $("$VENV/bin/python" --version 2>&1)"
	else
		[[ -e $VENV ]] && warn "$VENV is broken; recreating"
		rm -rf "$VENV"
		"$py" -m venv "$VENV" || die "python3 -m venv failed (is python3-venv installed?)"
		info "created with $("$VENV/bin/python" --version 2>&1)"
	fi

	if [[ ! -f pyproject.toml ]]; then
		info "no pyproject.toml yet: skipped pip install"
		return 0
	fi
	# Reinstall only when pyproject.toml changed: an editable install follows
	# source edits by itself, and pip takes seconds even when nothing changed.
	local stamp=$VENV/.squall-pyproject.sha256 sum
	sum=$(sha256sum pyproject.toml | cut -d' ' -f1)
	if [[ -f $stamp && $(cat "$stamp") == "$sum" ]]; then
		info "squall[dev] up to date"
		return 0
	fi
	info "pip install -e '.[dev]'"
	"$VENV/bin/pip" install -q --disable-pip-version-check -e '.[dev]' ||
		die "pip install -e '.[dev]' failed"
	echo "$sum" >"$stamp"
	info "installed squall[dev]"
}

# ---------------------------------------------------------------- build

build() {
	step "build ($BUILD_DIR)"
	if [[ ! -f $BUILD_DIR/build.ninja ]]; then
		local wipe=()
		[[ -d $BUILD_DIR/meson-private ]] && wipe=(--wipe)
		meson setup "${wipe[@]}" "$BUILD_DIR" || die "meson setup failed"
	fi
	# ninja re-runs meson by itself when a meson.build changed.
	ninja -C "$BUILD_DIR" || die "build failed"
	info "built in $BUILD_DIR"
}

# ---------------------------------------------------------------- main

main() {
	local do_build=0 arg
	for arg in "$@"; do
		case $arg in
		--build) do_build=1 ;;
		-h | --help)
			usage
			exit 0
			;;
		*)
			usage >&2
			exit 2
			;;
		esac
	done

	install_packages
	setup_hugepages
	setup_bpffs
	setup_nf_user
	setup_venv
	if ((do_build)); then
		build
	fi
	step "setup done"
}

main "$@"
