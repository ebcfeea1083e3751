# lit configuration for the IR tests that sit beside the analyses and passes
# they test (src/core/**/*.ll). Run through ctest, or by hand:
#   lit -v --param bin_dir=build/bin src/core
import os
import lit.formats

config.name = "morpheus-ir"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".ll"]
config.excludes = ["Inputs"]
config.test_source_root = os.path.dirname(__file__)

bin_dir = lit_config.params.get("bin_dir")
if not bin_dir:
    lit_config.fatal("pass --param bin_dir=<build>/bin")
# Temporary files (%t) go to the build tree, never beside the sources.
config.test_exec_root = os.path.join(os.path.abspath(bin_dir), os.pardir, "lit")
llvm_bin = lit_config.params.get("llvm_bin", "/usr/lib/llvm-19/bin")
config.environment["PATH"] = os.pathsep.join(
    [os.path.abspath(bin_dir), llvm_bin, config.environment.get("PATH", "")])
