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

.PHONY: help setup build test unit integration demo bench format lint clean distclean

help:
	@echo "make setup        system packages, hugepages, .venv (scripts/setup.sh)"
	@echo "make build        setup + meson/ninja build in $(BUILD)/"
	@echo "make test         build + C unit tests + pytest tests/integration"
	@echo "make unit         build + C unit tests only"
	@echo "make integration  build + pytest tests/integration only (PYTEST_ARGS=...)"
	@echo "make demo         build + scripts/demo.sh (DEMO_SECONDS=...)"
	@echo "make bench        build + bench/dataplane.py (BENCH_ARGS=...)"
	@echo "make format       clang-format and ruff format, in place"
	@echo "make lint         check formatting and ruff lints (part of make test)"
	@echo "make clean        remove $(BUILD)/; distclean also removes $(VENV)/"

setup:
	scripts/setup.sh

build:
	scripts/setup.sh --build

# An empty suite is a failure too (pytest exits 5 when it collects nothing).
define run_integration
	$(VENV)/bin/pytest -q $(PYTEST_ARGS) tests/integration
endef

test: build lint
	meson test -C $(BUILD) --print-errorlogs
	$(run_integration)

unit: build
	meson test -C $(BUILD) --print-errorlogs

integration: build
	$(run_integration)

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
	rm -rf $(BUILD)

distclean: clean
	rm -rf $(VENV)
