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

test: setup
	@cd $(BUILD_DIR) && ctest --output-on-failure --timeout 900

clean:
	rm -rf $(BUILD_DIR)
