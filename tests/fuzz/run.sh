#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Build the libFuzzer targets (clang, -Dfuzz=true, in build-fuzz/) and run
# each for a bounded time. Exit 1 if any target finds a crash, a leak, a
# sanitizer report or a timeout; the input is kept in build-fuzz/artifacts/.
#
#   tests/fuzz/run.sh [-t SECONDS] [TARGET...]   (default: 20 s each, all targets)
#
# Each target starts from its seeds in tests/fuzz/corpus/TARGET (read only)
# and keeps what it finds in build-fuzz/corpus/TARGET, so a second run goes
# on from there. Replay one input: build-fuzz/tests/fuzz/fuzz_TARGET FILE.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
SECONDS_EACH=20
TARGETS=(config firewall l3fwd telemetry parse)

while getopts "t:h" opt; do
	case $opt in
	t) SECONDS_EACH=$OPTARG ;;
	h)
		sed -n '4,13s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
		exit 0
		;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[[ $# -gt 0 ]] && TARGETS=("$@")

if [[ ! -f $BUILD/build.ninja ]]; then
	CC=clang meson setup "$BUILD" -Dfuzz=true -Dbuildtype=debugoptimized >/dev/null
fi
# Only the targets: the rest of the tree is built (and tested) by gcc in build/.
ninja -C "$BUILD" "${TARGETS[@]/#/tests/fuzz/fuzz_}" >/dev/null

failed=()
for t in "${TARGETS[@]}"; do
	bin=$BUILD/tests/fuzz/fuzz_$t
	[[ -x $bin ]] || {
		echo "fuzz: no target $t ($bin)" >&2
		exit 2
	}
	mkdir -p "$BUILD/corpus/$t" "$BUILD/artifacts"
	log=$BUILD/fuzz_$t.log
	dict=()
	[[ -f tests/fuzz/$t.dict ]] && dict=(-dict="tests/fuzz/$t.dict")
	# Frames up to past the jumbo limit (9018 B: an oversize drop).
	[[ $t == parse ]] && dict+=(-max_len=9100)
	# -timeout: one input may take 10 s at most (a hang is a finding too);
	# -rss_limit_mb: a runaway allocation is a finding, not a swapping box.
	if "$bin" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 "${dict[@]}" -artifact_prefix="$BUILD/artifacts/$t-" \
		"$BUILD/corpus/$t" "tests/fuzz/corpus/$t" >"$log" 2>&1; then
		execs=$(awk '/stat::number_of_executed_units:/ {print $2}' "$log")
		cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 || true)
		echo "fuzz $t: ok, ${execs:-?} inputs in ${SECONDS_EACH} s, ${cov:-cov: ?}"
	else
		echo "fuzz $t: FAILED (log $log)"
		grep -E 'ERROR|SUMMARY|Test unit written|==[0-9]+==' "$log" | head -n 20 | sed 's/^/    /'
		failed+=("$t")
	fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
	echo "fuzz: findings in ${failed[*]}" >&2
	exit 1
fi
