// Morpheus's caches (the cost model's calibration, clang's bitcode, the
// original's objects: support/CacheDirectory) for one test run, in
// $MORPHEUS_CACHE_DIR, which the morpheus processes the tests start inherit.
// Under ctest every gtest case is a process of its own, and the run's cases
// share the directory ctest made empty before the first of them
// ($MORPHEUS_TEST_RUN_CACHE, cmake/Tests.cmake): the cache is written with
// unique files and renames, so cases running side by side share it safely.
// A binary run by hand gets a directory of its own, removed when it ends. No
// test reads what an earlier run left, and no run writes into the user's
// ~/.cache.
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
  bool owned_ = false; // made by this process, so removed by it
};

} // namespace morpheus::testing
