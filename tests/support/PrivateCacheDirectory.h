// Morpheus's caches (the cost model's calibration, clang's bitcode, the
// original's objects: support/CacheDirectory) for one test run: a directory
// of the run's own in $MORPHEUS_CACHE_DIR, which the morpheus processes the
// tests start inherit, removed when the run ends. No test reads what an
// earlier run left, and no run writes into the user's ~/.cache.
#pragma once

#include <string>

namespace morpheus::testing {

class PrivateCacheDirectory {
public:
  // Empty path() when the directory could not be made (the reason printed).
  PrivateCacheDirectory();
  ~PrivateCacheDirectory();
  PrivateCacheDirectory(const PrivateCacheDirectory &) = delete;
  PrivateCacheDirectory &operator=(const PrivateCacheDirectory &) = delete;

  const std::string &path() const { return path_; }

private:
  std::string path_;
};

} // namespace morpheus::testing
