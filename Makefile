# berth: the main commands are `make test` (everything CI runs), `make check`
# (the unit tests) and `make demo`; each installs what it needs first
# (scripts/setup.sh is quiet when everything is there).
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
BAZEL ?= bazel
# ccache hits across clones of the tree (CI builds a fresh clone): paths
# relative to the tree, and the working directory kept out of the hash.
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1

.PHONY: all setup configure build check test demo placement-demo bench bazel clean sanitize fuzz replay chaos

all: build

setup:
	@bash scripts/setup.sh

$(BUILD_DIR)/build.ninja:
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release

configure: setup $(BUILD_DIR)/build.ninja

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)

# The unit tests only (ctest label `unit`): what to run while editing; builds
# just them. `make test` runs everything CI runs.
check: configure
	cmake --build $(BUILD_DIR) -j $(JOBS) --target unit_tests
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS) -L unit

# A local cluster, a train job followed to its end, status, `berth down`.
# Builds only what the demo runs: the CLI and the three daemons it starts.
DEMO_TARGETS = berth berth-head berth-raylet berth-worker
demo: configure
	cmake --build $(BUILD_DIR) -j $(JOBS) $(addprefix --target ,$(DEMO_TARGETS))
	BUILD_DIR=$(BUILD_DIR) bash scripts/demo.sh

# Every benchmark table of docs/PERFORMANCE.md, outputs under bench/results/
# (~30 min; BENCH="placement_bench loadgen scale train_startup replay ray"
# picks some, see bench/run_all.sh).
bench: build
	BUILD_DIR=$(BUILD_DIR) bash bench/run_all.sh

# The Alibaba GPU trace (openb, 2023) replayed on the placement core with every
# scorer (bench/replay), every pod-list variant in REPLAY_DATA: tables and plots
# under bench/results/ (~40 min, 1 core).
REPLAY_DATA ?= ../shared/data/alibaba-gpu-v2023
replay: build
	$(BUILD_DIR)/bench/berth-replay --data_dir=$(REPLAY_DATA) --results_dir=bench/results \
	    --plot_data_dir=$(BUILD_DIR)/replay-data --topology
	gnuplot -e "data='$(BUILD_DIR)/replay-data'; out='bench/results'" bench/replay/plot.gp

# The chaos test longer than CI runs it (tests/chaos/chaos_test.cc; CI: the
# default seed, 1,200 operations). docs/reliability.md has a long run's figures.
# HEAD_PAUSE_MS: how long each head pause lasts (default 1.5 liveness timeouts).
SEED ?= 20261129
ITERATIONS ?= 5000
HEAD_PAUSE_MS ?=
chaos: build
	BERTH_CHAOS_SEED=$(SEED) BERTH_CHAOS_ITERATIONS=$(ITERATIONS) \
	  BERTH_CHAOS_HEAD_PAUSE_MS=$(HEAD_PAUSE_MS) $(BUILD_DIR)/tests/chaos/chaos_test

# The secondary, offline Bazel build and its unit tests.
bazel: setup
	$(BAZEL) build --jobs=$(JOBS) //...
	$(BAZEL) test --jobs=$(JOBS) //tests:unit

# Tests under ASan+UBSan (build-asan) and the head under TSan (build-tsan);
# SANITIZE_SCOPE=ci: only the unit tests and control_plane_test under ASan,
# without the torch worker.
SANITIZE_SCOPE ?= full
sanitize: setup
	SCOPE=$(SANITIZE_SCOPE) JOBS=$(JOBS) bash tests/sanitize/run.sh all

# The libFuzzer targets (build-fuzz), FUZZ_SECONDS each.
FUZZ_SECONDS ?= 60
fuzz: setup
	JOBS=$(JOBS) bash tests/fuzz/run_fuzzers.sh build-fuzz $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD_DIR)

# The first demo: the placement core alone on a simulated heterogeneous cluster.
placement-demo: configure
	cmake --build $(BUILD_DIR) -j $(JOBS) --target berth-placement-demo
	$(BUILD_DIR)/train/berth-placement-demo
