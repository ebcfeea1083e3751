// main() of every test binary that needs no kernel: gtest's, run with a
// cache directory of its own (PrivateCacheDirectory).
#include "PrivateCacheDirectory.h"

#include <gtest/gtest.h>

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  morpheus::testing::PrivateCacheDirectory cache;
  if (cache.path().empty())
    return 1;
  return RUN_ALL_TESTS();
}
