#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The Squall demo: squall-mgr bridges two namespaces through a chain
# (monitor -> fwd, examples/demo.yaml); ping and HTTP go through it while
# squallctl shows the counters. Cleans up after itself, also on Ctrl-C.
#
#   scripts/demo.sh             (as root, after `make build`; or just `make demo`)
#
# While it runs, `squallctl serve` shows it live: the dashboard and the
# Prometheus metrics at the URL printed (http://127.0.0.1:9470/ by default).
#
# Environment:
#   DEMO_SECONDS   how long the traffic loop runs after the first checks (default 10)
#   DEMO_LISTEN    where squallctl serve listens (default 127.0.0.1:9470)
#
# Exit status: 0 if every ping and HTTP request got through, 1 otherwise.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

DEMO_SECONDS=${DEMO_SECONDS:-10}
DEMO_LISTEN=${DEMO_LISTEN:-127.0.0.1:9470}
MGR=build/mgr/squall-mgr
CONFIG=examples/demo.yaml
NAME=demo
TELEMETRY=/var/run/dpdk/squall-$NAME/dpdk_telemetry.v2
SERVER_IP=10.77.0.2
PORT=8080
URL=http://$SERVER_IP:$PORT
BIG_BYTES=$((1024 * 1024))

step() { printf '\n==> %s\n' "$*"; }
die() {
	printf 'demo.sh: error: %s\n' "$*" >&2
	exit 1
}

mgr_pid=
web_pid=
serve_pid=
tmp_dir=
failures=0
cleaned=0

cleanup() {
	local rc=$?
	((cleaned)) && return 0
	cleaned=1
	set +e
	trap - INT TERM
	step "cleanup"
	if [[ -n $mgr_pid ]] && kill -0 "$mgr_pid" 2>/dev/null; then
		kill -TERM "$mgr_pid" 2>/dev/null
		local i
		for ((i = 0; i < 100; i++)); do
			kill -0 "$mgr_pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$mgr_pid" 2>/dev/null; then
			echo "squall-mgr did not stop within 10 s: SIGKILL"
			kill -KILL "$mgr_pid" 2>/dev/null
		fi
		wait "$mgr_pid" 2>/dev/null
		echo "squall-mgr exited with status $?"
	fi
	if [[ -n $web_pid ]]; then
		kill -TERM "$web_pid" 2>/dev/null
		wait "$web_pid" 2>/dev/null
	fi
	if [[ -n $serve_pid ]]; then
		kill -TERM "$serve_pid" 2>/dev/null
		wait "$serve_pid" 2>/dev/null
	fi
	scripts/netns.sh down
	rm -f "/dev/hugepages/squall-$NAME.region" "/dev/shm/squall-$NAME.region"
	[[ -n $tmp_dir ]] && rm -rf "$tmp_dir"
	return "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Bounded wait: until COMMAND succeeds or SECONDS_MAX pass; polls every 0.1 s.
wait_for() {
	local max_s=$1 end
	shift
	end=$((SECONDS + max_s))
	until "$@"; do
		((SECONDS < end)) || return 1
		sleep 0.1
	done
}

mgr_is_running() { [[ -n $mgr_pid ]] && kill -0 "$mgr_pid" 2>/dev/null; }
telemetry_is_up() {
	mgr_is_running || die "squall-mgr exited before it was ready"
	[[ -S $TELEMETRY ]]
}
web_is_up() {
	ip netns exec server curl -sf --max-time 1 -o /dev/null "$URL/" 2>/dev/null
}
serve_is_up() { curl -sf --max-time 1 -o /dev/null "http://$DEMO_LISTEN/metrics" 2>/dev/null; }
path_is_up() { ip netns exec client ping -c 1 -W 1 -q "$SERVER_IP" >/dev/null 2>&1; }

# Live counters: squallctl if the venv has it, else DPDK's own telemetry client.
show_status() {
	if [[ -x .venv/bin/squallctl ]]; then
		timeout 5 .venv/bin/squallctl --name "$NAME" status ||
			echo "(squallctl status failed: $?)"
	else
		printf '/squall/ports\n/squall/nfs\n' |
			timeout 5 dpdk-telemetry.py -f "squall-$NAME" ||
			echo "(dpdk-telemetry.py failed: $?)"
	fi
}

# One HTTP GET from the client namespace. Prints "code size time" unless
# QUIET=1 (then only failures). EXPECT_BYTES, if given, must match the size.
http_get() {
	local path=$1 expect_bytes=${2:-} out code size time_s
	if ! out=$(ip netns exec client curl -sS --max-time 5 -o /dev/null \
		-w '%{http_code} %{size_download} %{time_total}' "$URL/$path"); then
		echo "GET /$path: curl failed"
		return 1
	fi
	read -r code size time_s <<<"$out"
	if [[ $code != 200 ]] || [[ -n $expect_bytes && $size != "$expect_bytes" ]]; then
		echo "GET /$path: HTTP $code ${size}B ${time_s}s${expect_bytes:+ (expected ${expect_bytes}B)}"
		return 1
	fi
	[[ ${QUIET:-0} == 1 ]] || echo "GET /$path: $code ${size}B ${time_s}s"
}

# ---------------------------------------------------------------- checks

[[ $EUID -eq 0 ]] || die "run as root (the demo makes namespaces and drives veth ports)"
[[ -x $MGR ]] || die "$MGR not found: run 'make build' first (or 'make demo')"
for tool in ip ping curl timeout; do
	command -v "$tool" >/dev/null || die "$tool not found: run scripts/setup.sh"
done
[[ $DEMO_SECONDS =~ ^[0-9]+$ ]] || die "DEMO_SECONDS must be a whole number of seconds"
if pgrep -x squall-mgr >/dev/null && [[ -S $TELEMETRY ]]; then
	die "a squall-mgr named '$NAME' seems to be running already ($TELEMETRY exists)"
fi
rm -f "/dev/hugepages/squall-$NAME.region" "/dev/shm/squall-$NAME.region"
PYTHON=$(python3 -c 'import sys; print(sys.executable)')

# ---------------------------------------------------------------- run

step "namespaces: client 10.77.0.1 and server $SERVER_IP, not connected"
scripts/netns.sh up

step "squall-mgr $CONFIG"
"$MGR" "$CONFIG" &
mgr_pid=$!
wait_for 15 telemetry_is_up || die "no telemetry socket $TELEMETRY after 15 s"
echo "squall-mgr pid $mgr_pid is up ($TELEMETRY)"

# The exporter and dashboard: not part of the pass/fail, a window into it.
if [[ -x .venv/bin/squallctl ]]; then
	step "squallctl serve: dashboard and Prometheus metrics"
	tmp_dir=$(mktemp -d /tmp/squall-demo.XXXXXX)
	.venv/bin/squallctl --name "$NAME" serve --listen "$DEMO_LISTEN" >"$tmp_dir/serve.log" 2>&1 &
	serve_pid=$!
	if wait_for 10 serve_is_up; then
		echo "dashboard:  http://$DEMO_LISTEN/"
		echo "metrics:    http://$DEMO_LISTEN/metrics  (docs/observability.md: Prometheus, Grafana)"
	else
		echo "(squallctl serve did not answer on $DEMO_LISTEN: $(tail -n 1 "$tmp_dir/serve.log"))"
	fi
fi

step "web server in ns server on $URL"
[[ -n $tmp_dir ]] || tmp_dir=$(mktemp -d /tmp/squall-demo.XXXXXX)
echo '<html><body>hello from squall</body></html>' >"$tmp_dir/index.html"
head -c "$BIG_BYTES" /dev/urandom >"$tmp_dir/big.bin"
ip netns exec server "$PYTHON" -m http.server "$PORT" --bind "$SERVER_IP" \
	--directory "$tmp_dir" >"$tmp_dir/http.log" 2>&1 &
web_pid=$!
wait_for 10 web_is_up || die "web server did not come up (log: $(tail -n 3 "$tmp_dir/http.log"))"

step "ping client -> server through the chain"
# The ports may still be coming up when telemetry already answers.
if wait_for 10 path_is_up; then
	ip netns exec client ping -c 5 -i 0.2 -W 2 "$SERVER_IP" || failures=$((failures + 1))
else
	echo "no ping reply through squall-mgr after 10 s"
	failures=$((failures + 1))
fi

step "HTTP client -> server"
for path in "" "" "" big.bin; do
	expect=
	[[ $path == big.bin ]] && expect=$BIG_BYTES
	http_get "$path" $expect || failures=$((failures + 1))
done

step "counters"
show_status

step "traffic for ${DEMO_SECONDS} s (status every 2 s)"
requests=0
failed=0
end=$((SECONDS + DEMO_SECONDS))
next_status=$((SECONDS + 2))
while ((SECONDS < end)); do
	mgr_is_running || {
		echo "squall-mgr exited during the demo"
		failed=$((failed + 1))
		break
	}
	requests=$((requests + 1))
	QUIET=1 http_get "" || failed=$((failed + 1))
	if ((SECONDS >= next_status)); then
		show_status
		next_status=$((SECONDS + 2))
	fi
	sleep 0.1
done
echo "traffic loop: $requests requests, $failed failed"
failures=$((failures + failed))

step "final counters"
show_status
mgr_is_running || {
	echo "squall-mgr is not running at the end of the demo"
	failures=$((failures + 1))
}

if ((failures > 0)); then
	step "demo FAILED: $failures check(s) failed"
	exit 1
fi
step "demo passed: ping and HTTP went through squall-mgr"
