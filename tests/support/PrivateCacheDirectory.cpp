#include "PrivateCacheDirectory.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace morpheus::testing {

PrivateCacheDirectory::PrivateCacheDirectory() {
  char name[] = "/tmp/morpheus-test-cache-XXXXXX";
  if (!mkdtemp(name)) {
    std::perror("morpheus tests: a cache directory of their own");
    return;
  }
  path_ = name;
  setenv("MORPHEUS_CACHE_DIR", name, 1);
}

PrivateCacheDirectory::~PrivateCacheDirectory() {
  if (path_.empty())
    return;
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

} // namespace morpheus::testing
