# SPDX-License-Identifier: BSD-3-Clause
#
# Entry points for people and CI. `make test` is the test command; CI runs it
# on a fresh machine through .ci/run, so every target installs what it needs
# (scripts/setup.sh is idempotent and fast when nothing is missing).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

BUILD := build
VENV := .venv
PYTEST_ARGS ?=
BENCH_ARGS ?=

C_DIRS := include lib mgr nfs tests bench examples
PY_DIRS := python tests bench

# Fuzzing (tests/fuzz/README.md): seconds per target; make test runs each
# for FUZZ_TEST_SECONDS.
FUZZ_SECONDS ?= 300
FUZZ_TEST_SECONDS ?= 20

# The sanitizer build (ASan + UBSan, clang: gcc's UBSan ignores log_path
# beside ASan, so an NF's report would go unseen) and the integration tests run
# against it: the manager's main paths (chains, per-flow pools, NF crashes and
# bad metadata, malformed frames, config errors, telemetry, generator).
# Left out: the namespace tests (their lock, and iperf3/wrk time), the
# benchmarks and density tests (10,000 NFs with ASan's runtime each), the
# wake-policy and priority tests, the memory_mb tests (RLIMIT_DATA leaves
# no room for the sanitizer's shadow), and five tests whose counts hang on timing
# (each failed now and then at ASan's speed on a loaded machine);
# the out-of-tree NF is built without ASan against the ASan libsquall.
ASAN_BUILD := build-asan
ASAN_LOGS := $(ASAN_BUILD)/sanitizer-logs
ASAN_TESTS ?= $(addprefix tests/integration/, test_per_flow.py test_malformed.py \
	test_config_errors.py test_chain_pcap.py test_bad_metadata.py test_nf_crash.py \
	test_squallctl.py test_tagged_frames.py test_roles.py test_generator.py \
	test_nf_api.py test_mac_rules.py test_latency.py test_telemetry_names.py \
	test_shared_core.py test_per_flow_edges.py test_apply.py test_apply_per_flow.py \
	test_restart.py test_aes.py test_capture.py test_bad_descriptors.py test_nf_user.py \
	test_region_trust.py test_scaling.py test_messages.py test_isolated.py test_direct.py \
	test_idle.py test_stateful_nat.py test_stateful_lb.py test_fwd.py test_nf_trust.py \
	test_jumbo_nfs.py)
ASAN_DESELECT ?= $(addprefix --deselect tests/integration/, \
	test_isolated.py::test_unbounded_memory_is_contained \
	test_nf_trust.py::test_memory_mb_bounds_shared_mappings \
	test_nf_trust.py::test_memory_mb_leaves_no_huge_pages_of_its_own \
	test_per_flow.py::test_lifo_without_linger_hands_the_nf_its_next_flow_at_the_close \
	test_per_flow.py::test_a_resumed_generator_starts_new_connections \
	test_per_flow.py::test_a_stuck_nf_does_not_hold_back_the_other_flows_ends \
	test_per_flow.py::test_a_flow_that_got_its_nf_from_the_queue_keeps_its_order \
	test_shared_core.py::test_chain_on_one_core_keeps_up_with_a_steady_rate \
	test_nf_api.py::test_out_of_tree_nf_runs_in_a_chain)

.PHONY: help setup build test unit integration fuzz asan demo bench format lint clean distclean

help:
	@echo "make setup        system packages, hugepages, .venv (scripts/setup.sh)"
	@echo "make build        setup + meson/ninja build in $(BUILD)/"
	@echo "make test         build + C unit tests + pytest tests/integration + short fuzz runs"
	@echo "                  + the ASan/UBSan build and its integration subset"
	@echo "make unit         build + C unit tests only"
	@echo "make integration  build + pytest tests/integration only (PYTEST_ARGS=...)"
	@echo "make fuzz         build-fuzz/ (clang, libFuzzer) + each fuzz target for FUZZ_SECONDS"
	@echo "make asan         build-asan/ (ASan+UBSan) + the integration subset against it"
	@echo "make demo         build + scripts/demo.sh (DEMO_SECONDS=...)"
	@echo "make bench        build + bench/dataplane.py (BENCH_ARGS=...)"
	@echo "make format       clang-format and ruff format, in place"
	@echo "make lint         check formatting and ruff lints (part of make test)"
	@echo "make clean        remove $(BUILD)/ build-fuzz/ $(ASAN_BUILD)/ build-nochecks/; distclean also $(VENV)/"

setup:
	scripts/setup.sh

build:
	scripts/setup.sh --build

# An empty suite is a failure too (pytest exits 5 when it collects nothing).
define run_integration
	$(VENV)/bin/pytest -q $(PYTEST_ARGS) tests/integration
endef

# Any sanitizer report fails: UBSan aborts at the first (-fno-sanitize-recover),
# ASan at any error, LeakSanitizer at exit (the manager's exit code is checked).
# Reports go to files (log_path), since an NF's stderr is not the test's: any
# such file with something in it is a finding, printed and failed on.
define run_asan
	if [[ ! -f $(ASAN_BUILD)/build.ninja ]]; then \
		CC=clang meson setup $(ASAN_BUILD) --buildtype=debugoptimized \
			-Db_sanitize=address,undefined -Db_lundef=false \
			-Dc_args=-fno-sanitize-recover=undefined; \
	fi
	ninja -C $(ASAN_BUILD)
	rm -rf $(ASAN_LOGS) && mkdir -p $(ASAN_LOGS)
	rc=0; \
	SQUALL_BUILD_DIR=$(CURDIR)/$(ASAN_BUILD) \
	ASAN_OPTIONS=log_path=$(CURDIR)/$(ASAN_LOGS)/asan:detect_leaks=1 \
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0 \
	UBSAN_OPTIONS=log_path=$(CURDIR)/$(ASAN_LOGS)/ubsan:print_stacktrace=1:halt_on_error=1 \
		$(VENV)/bin/pytest -q $(PYTEST_ARGS) $(ASAN_DESELECT) $(ASAN_TESTS) || rc=$$?; \
	found=$$(find $(ASAN_LOGS) -type f -size +0); \
	if [[ -n $$found ]]; then \
		echo "sanitizer findings ($(ASAN_LOGS)):"; cat $$found; rc=1; \
	fi; \
	exit $$rc
endef

test: build lint
	meson test -C $(BUILD) --print-errorlogs
	$(run_integration)
	tests/fuzz/run.sh -t $(FUZZ_TEST_SECONDS)
	$(run_asan)

unit: build
	meson test -C $(BUILD) --print-errorlogs

integration: build
	$(run_integration)

fuzz: setup
	tests/fuzz/run.sh -t $(FUZZ_SECONDS)

asan: setup
	$(run_asan)

demo: build
	scripts/demo.sh

bench: build
	$(VENV)/bin/python bench/dataplane.py $(BENCH_ARGS)

format:
	find $(wildcard $(C_DIRS)) -name '*.[ch]' -print0 | xargs -0 -r clang-format -i
	$(VENV)/bin/ruff format $(wildcard $(PY_DIRS))

# The formatters as configured (.clang-format, pyproject.toml), checking only.
lint: setup
	find $(wildcard $(C_DIRS)) -name '*.[ch]' -print0 | xargs -0 -r clang-format --dry-run -Werror
	$(VENV)/bin/ruff format --check $(wildcard $(PY_DIRS))
	$(VENV)/bin/ruff check $(wildcard $(PY_DIRS))

clean:
	rm -rf $(BUILD) build-fuzz $(ASAN_BUILD) build-nochecks

distclean: clean
	rm -rf $(VENV)
