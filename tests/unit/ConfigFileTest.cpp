// The network functions' config files: errors name the file and the line.
#include "nf/common/ConfigFile.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
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

// Only a regular text file of a sane size is read: a directory, a device
// (/dev/zero would be read until memory runs out), a FIFO (opening it would
// wait for a writer), a file too large or a line with control bytes is
// refused, the file (and line) named. Tabs and CRLF line ends are text.
TEST(ConfigFile, WhatIsNotATextFileIsRefused) {
  std::string dir = "/tmp/morpheus-config-refused-" + std::to_string(getpid());
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  std::string fifo = dir + "/fifo", large = dir + "/large", binary = dir + "/binary",
              crlf = dir + "/crlf";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::ofstream(large).close();
  ASSERT_EQ(truncate(large.c_str(), off_t(nf::MaxConfigBytes) + 1), 0);
  std::ofstream(binary) << "10.0.0.0/8 direct\n# fine\n10.1.0.0/16 \x01\x02 direct\n";
  std::ofstream(crlf) << "10.0.0.0/8\tdirect 1\r\n\r\n  11.0.0.0/8  direct # \xc3\xa9\r\n";
  struct Case {
    std::string path, said;
  } cases[] = {
      {"/dev/zero", "/dev/zero: not a regular file (a character device): a configuration is a "
                    "text file"},
      {dir, dir + ": is a directory, not a configuration file"},
      {fifo, fifo + ": not a regular file (a FIFO): a configuration is a text file"},
      {large, large + ": " + std::to_string(nf::MaxConfigBytes + 1) +
                  " bytes; a configuration larger than " + std::to_string(nf::MaxConfigBytes) +
                  " bytes is refused"},
      {binary, binary + ":3: not text (byte 0x01 at column 13)"},
      {dir + "/missing", dir + "/missing: cannot open: No such file or directory"},
  };
  for (const Case &refused : cases) {
    auto lines = nf::readConfig(refused.path);
    ASSERT_FALSE(bool(lines)) << refused.path;
    EXPECT_EQ(llvm::toString(lines.takeError()), refused.said);
  }
  auto lines = nf::readConfig(crlf);
  ASSERT_TRUE(bool(lines)) << llvm::toString(lines.takeError());
  ASSERT_EQ(lines->size(), 2u);
  EXPECT_EQ((*lines)[0].words, (std::vector<std::string>{"10.0.0.0/8", "direct", "1"}));
  EXPECT_EQ((*lines)[1].number, 3u);
  EXPECT_EQ((*lines)[1].words, (std::vector<std::string>{"11.0.0.0/8", "direct"}));
  for (const std::string &file : {fifo, large, binary, crlf})
    unlink(file.c_str());
  rmdir(dir.c_str());
}

} // namespace
} // namespace morpheus
