// The network functions' config files: errors name the file and the line.
#include "nf/common/ConfigFile.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace morpheus {
namespace {

TEST(ConfigFile, ErrorsNameFileAndLine) {
  std::string path = "/tmp/morpheus-config-test-" + std::to_string(getpid()) + ".txt";
  std::ofstream(path) << "# routes\n\n10.0.0.0/8 192.168.1.1  # core\n10.1.0.0/33 1.2.3.4\n";
  auto lines = nf::readConfig(path);
  ASSERT_TRUE(bool(lines));
  ASSERT_EQ(lines->size(), 2u);
  EXPECT_EQ((*lines)[0].number, 3u);
  auto good = nf::parsePrefix((*lines)[0], (*lines)[0].words[0], "prefix");
  ASSERT_TRUE(bool(good));
  EXPECT_EQ(good->address, 0x0a000000u);
  EXPECT_EQ(good->length, 8);
  auto bad = nf::parsePrefix((*lines)[1], (*lines)[1].words[0], "prefix");
  ASSERT_FALSE(bool(bad));
  EXPECT_EQ(llvm::toString(bad.takeError()), path + ":4: prefix: 33 is larger than 32");
  auto hostBits = nf::parsePrefix((*lines)[1], "10.0.0.1/8", "prefix");
  ASSERT_FALSE(bool(hostBits));
  EXPECT_NE(llvm::toString(hostBits.takeError()).find("host bits"), std::string::npos);
  auto range = nf::parsePortRange((*lines)[0], "80:70", "dport");
  ASSERT_FALSE(bool(range));
  EXPECT_NE(llvm::toString(range.takeError()).find("empty"), std::string::npos);
  unlink(path.c_str());
}

} // namespace
} // namespace morpheus
