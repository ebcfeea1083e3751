// The frontends' bitcode cache (support/Clang.h): a hit only for the same
// preprocessed source, flags and clang; a changed header, macro or damaged
// entry compiles again; a cache that cannot be written is compiled around.
#include "support/Clang.h"
#include "support/FileCache.h"

#include <gtest/gtest.h>
#include <llvm/ADT/SmallString.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>
#include <llvm/Testing/Support/Error.h>

#include <fstream>
#include <utime.h>

namespace morpheus {
namespace {

class BitcodeCache : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("morpheus-bitcode-cache", root));
    cache = (root + "/cache").str();
    source = (root + "/prog.c").str();
    write(source, "#include \"value.h\"\nint value(void) { return VALUE + OFFSET; }\n");
    header(7);
  }
  void TearDown() override { llvm::sys::fs::remove_directories(root); }

  static void write(const std::string &path, const std::string &text) {
    std::ofstream(path, std::ios::trunc) << text;
  }
  void header(int value) {
    write((root + "/value.h").str(), "#define VALUE " + std::to_string(value) + "\n");
  }
  Bitcode compile(const std::vector<std::string> &extra = {"-DOFFSET=0"},
                  std::optional<std::string> directory = std::nullopt) {
    std::vector<std::string> flags = {"-O2", "-g"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    auto bitcode = compileToBitcode(MORPHEUS_CLANG, source, flags, directory ? directory : cache);
    EXPECT_THAT_EXPECTED(bitcode, llvm::Succeeded());
    return bitcode ? std::move(*bitcode) : Bitcode{};
  }
  std::vector<std::string> entries() const {
    std::vector<std::string> found;
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(cache + "/bitcode", ec), end; !ec && it != end;
         it.increment(ec))
      found.push_back(it->path());
    return found;
  }

  llvm::SmallString<128> root;
  std::string cache, source;
};

TEST_F(BitcodeCache, TheSameSourceIsReadBackAndAChangedHeaderOrMacroCompilesAgain) {
  Bitcode first = compile();
  ASSERT_TRUE(first.buffer);
  EXPECT_FALSE(first.fromCache);
  Bitcode again = compile();
  ASSERT_TRUE(again.buffer);
  EXPECT_TRUE(again.fromCache);
  EXPECT_EQ(again.buffer->getBuffer(), first.buffer->getBuffer());

  header(8); // a header the source includes: the preprocessed text differs
  Bitcode changed = compile();
  EXPECT_FALSE(changed.fromCache);
  EXPECT_NE(changed.buffer->getBuffer(), first.buffer->getBuffer());
  Bitcode otherMacro = compile({"-DOFFSET=1"});
  EXPECT_FALSE(otherMacro.fromCache);
  EXPECT_NE(otherMacro.buffer->getBuffer(), changed.buffer->getBuffer());

  header(7); // back: the first entry is still there
  Bitcode back = compile();
  EXPECT_TRUE(back.fromCache);
  EXPECT_EQ(back.buffer->getBuffer(), first.buffer->getBuffer());
  EXPECT_EQ(entries().size(), 3u);
}

TEST_F(BitcodeCache, ADamagedEntryIsCompiledAgain) {
  Bitcode first = compile();
  std::vector<std::string> stored = entries();
  ASSERT_EQ(stored.size(), 1u);
  {
    std::fstream entry(stored[0], std::ios::in | std::ios::out | std::ios::binary);
    entry.seekp(40);
    entry.put('\xff'); // a byte of the bitcode, past the checksum
  }
  Bitcode recompiled = compile();
  EXPECT_FALSE(recompiled.fromCache);
  EXPECT_EQ(recompiled.buffer->getBuffer(), first.buffer->getBuffer());
  EXPECT_TRUE(compile().fromCache) << "the entry is stored again";
}

// ... and said once, naming the directory and why, not at every store.
TEST_F(BitcodeCache, ACacheThatCannotBeWrittenIsCompiledAround) {
  std::string file = (root + "/not-a-directory").str();
  write(file, "");
  ::testing::internal::CaptureStderr();
  Bitcode first = compile({"-DOFFSET=0"}, file + "/cache");
  ASSERT_TRUE(first.buffer);
  EXPECT_FALSE(first.fromCache);
  EXPECT_FALSE(compile({"-DOFFSET=0"}, file + "/cache").fromCache);
  EXPECT_FALSE(compile({"-DOFFSET=1"}, file + "/cache").fromCache);
  std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(said, "morpheus: warning: cache directory " + file + "/cache: cannot create " +
                      file + "/cache/bitcode (Not a directory): going on without it (set "
                      "MORPHEUS_CACHE_DIR to a writable directory to keep what is built across "
                      "runs)\n");
}

TEST_F(BitcodeCache, TheLeastRecentlyUsedEntriesBeyondTheLimitAreRemoved) {
  ASSERT_FALSE(llvm::sys::fs::create_directories(cache + "/bitcode"));
  for (size_t i = 0; i < CacheEntriesKept + 5; ++i) {
    std::string old = cache + "/bitcode/bitcode-old" + std::to_string(i) + ".bc";
    write(old, "x");
    utimbuf past{1000, 1000};
    ASSERT_EQ(::utime(old.c_str(), &past), 0);
  }
  Bitcode fresh = compile();
  EXPECT_FALSE(fresh.fromCache);
  EXPECT_EQ(entries().size(), CacheEntriesKept);
  EXPECT_TRUE(compile().fromCache) << "the entry just stored is the most recent: kept";
}

} // namespace
} // namespace morpheus
