# berth: the two commands are `make test` and `make demo`; both install what
# they need first (scripts/setup.sh is quiet when everything is there).
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
BAZEL ?= bazel

.PHONY: all setup configure build test demo placement-demo bench bazel clean

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

# A local cluster, a train job followed to its end, status, `berth down`.
demo: build
	BUILD_DIR=$(BUILD_DIR) bash scripts/demo.sh

bench: build
	$(BUILD_DIR)/bench/placement_bench --benchmark_counters_tabular=true

# The secondary, offline Bazel build and its unit tests.
bazel: setup
	$(BAZEL) build --jobs=$(JOBS) //...
	$(BAZEL) test --jobs=$(JOBS) //tests:unit

clean:
	rm -rf $(BUILD_DIR)

# The first demo: the placement core alone on a simulated heterogeneous cluster.
placement-demo: build
	$(BUILD_DIR)/train/berth-placement-demo
