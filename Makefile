# The two commands a newcomer needs (see README.md):
#   make demo   install, build, and show Morpheus speeding up a live program
#   make test   install, build, and run the whole test suite
BUILD_DIR ?= build
export BUILD_DIR

.PHONY: all setup demo test clean

all: setup

setup:
	@scripts/setup.sh

demo: setup
	@$(BUILD_DIR)/bin/morpheus-demo

# Every gtest case is a ctest entry of its own (cmake/Tests.cmake); cases run
# side by side, twice as many as there are cores (many wait on the kernel or
# on a cycle rather than compute).
TEST_JOBS ?= $(shell echo $$(( $$(nproc) * 2 )))

test: setup
	@cd $(BUILD_DIR) && ctest --output-on-failure --timeout 900 -j $(TEST_JOBS)

clean:
	rm -rf $(BUILD_DIR)
