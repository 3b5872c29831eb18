# zbpp — the two commands: `make run` (the main job) and `make test` (every test).
JOBS ?= 2
BUILD ?= build
BUILD_ASAN ?= build-asan

.PHONY: all setup build run test test-release test-asan bench fuzz clean

all: build

setup:
	@scripts/setup.sh

build: setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DZB_WERROR=ON >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

run: build
	@scripts/demo.sh $(BUILD)/zbpp

test: test-release test-asan

test-release: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: setup
	cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZB_WERROR=ON -DZB_SANITIZE=ON >/dev/null
	cmake --build $(BUILD_ASAN) -j $(JOBS)
	cd $(BUILD_ASAN) && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS) -LE slow

bench: build
	@scripts/bench.sh $(BUILD)

# libFuzzer campaign: every harness in turn, FUZZ_EACH seconds each (default 600), corpora kept in
# fuzz/corpus-run/ (docs/reliability.md). Needs clang + libclang-rt-dev (scripts/setup.sh).
FUZZ_EACH ?= 600
fuzz: build
	FUZZ_EACH=$(FUZZ_EACH) FUZZ_KEEP=$(CURDIR)/fuzz/corpus-run bash tests/fuzz_smoke.sh $(BUILD)/zbpp .

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) build-fuzz
