# zbpp — the two commands: `make run` (the main job) and `make test` (every test).
SHELL := /bin/bash
JOBS ?= 2
BUILD ?= build
BUILD_RUN ?= build-run
BUILD_ASAN ?= build-asan

.PHONY: all setup setup-run build build-run run test test-release test-asan bench fuzz clean

all: build

setup:
	@scripts/setup.sh test

setup-run:
	@scripts/setup.sh run

# `make run` builds the CLI alone (no tests, no CUDA kernels: the demo trains on the CPU) in its
# own tree, so it never waits for what only `make test` needs
build-run: setup-run
	cmake -S . -B $(BUILD_RUN) -DCMAKE_BUILD_TYPE=Release -DZB_WERROR=ON -DZB_TESTS=OFF \
	      -DZB_CUDA=OFF >/dev/null
	cmake --build $(BUILD_RUN) -j $(JOBS) --target zbpp_cli

build: setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DZB_WERROR=ON >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

run: build-run
	@scripts/demo.sh $(BUILD_RUN)/zbpp

test: test-release test-asan

# ctest's summary names every skipped test ("Not Run"/"Skipped": no GPU, no torch, no mpirun);
# scripts/test_summary.sh repeats them on one line after the percentage, so they are never
# hidden inside "100% tests passed"
test-release: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) | tee ctest.log; \
	  rc=$${PIPESTATUS[0]}; $(CURDIR)/scripts/test_summary.sh ctest.log; exit $$rc

test-asan: setup
	cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZB_WERROR=ON -DZB_SANITIZE=ON >/dev/null
	cmake --build $(BUILD_ASAN) -j $(JOBS)
	cd $(BUILD_ASAN) && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS) -LE slow \
	  | tee ctest.log; rc=$${PIPESTATUS[0]}; $(CURDIR)/scripts/test_summary.sh ctest.log; exit $$rc

bench: build
	@scripts/bench.sh $(BUILD)

# libFuzzer campaign: every harness in turn, FUZZ_EACH seconds each (default 600), corpora kept in
# fuzz/corpus-run/ (docs/reliability.md). Needs clang + libclang-rt-dev (scripts/setup.sh).
FUZZ_EACH ?= 600
fuzz: build
	FUZZ_EACH=$(FUZZ_EACH) FUZZ_KEEP=$(CURDIR)/fuzz/corpus-run bash tests/fuzz_smoke.sh $(BUILD)/zbpp .

clean:
	rm -rf $(BUILD) $(BUILD_RUN) $(BUILD_ASAN) build-fuzz
