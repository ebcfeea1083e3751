#include "PrivateCacheDirectory.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace morpheus::testing {

PrivateCacheDirectory::PrivateCacheDirectory() {
  if (const char *run = std::getenv("MORPHEUS_TEST_RUN_CACHE")) {
    std::error_code ec;
    if (!std::filesystem::is_directory(run, ec)) {
      std::fprintf(stderr,
                   "morpheus tests: the test run's cache directory %s does not exist (ctest "
                   "makes it in the fixture test test_run_cache_setup)\n",
                   run);
      return;
    }
    path_ = run;
  } else {
    char name[] = "/tmp/morpheus-test-cache-XXXXXX";
    if (!mkdtemp(name)) {
      std::perror("morpheus tests: a cache directory of their own");
      return;
    }
    path_ = name;
    owned_ = true;
  }
  setenv("MORPHEUS_CACHE_DIR", path_.c_str(), 1);
}

PrivateCacheDirectory::~PrivateCacheDirectory() {
  if (!owned_)
    return;
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

} // namespace morpheus::testing
