// Files Morpheus writes (support/Files): whole, at the mode asked, never
// through a link someone planted at the name or at the temporary name the
// old writer used (PATH.tmp), and files holding map contents only in a
// directory of ours that nobody else may enter.
#include "support/Files.h"

#include <gtest/gtest.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Testing/Support/Error.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace morpheus {
namespace {

namespace fs = std::filesystem;

// A fresh directory of the test's own, removed with everything in it.
struct ScratchDir {
  fs::path path;
  ScratchDir() {
    llvm::SmallString<128> made;
    EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("morpheus-files-test", made));
    path = made.str().str();
  }
  ~ScratchDir() { fs::remove_all(path); }
};

std::string contentsOf(const fs::path &path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

unsigned modeOf(const fs::path &path) {
  struct stat status = {};
  EXPECT_EQ(lstat(path.c_str(), &status), 0) << path;
  return status.st_mode & 07777;
}

size_t entriesIn(const fs::path &dir) {
  return std::distance(fs::directory_iterator(dir), fs::directory_iterator());
}

TEST(Files, WriteReplacesALinkAtTheNameAndNeverFollowsOne) {
  ScratchDir scratch;
  fs::path victim = scratch.path / "victim";
  std::ofstream(victim) << "root's file";
  fs::path target = scratch.path / "report.json";
  fs::create_symlink(victim, target);
  // The temporary name the old writer used, planted too.
  fs::create_symlink(victim, scratch.path / "report.json.tmp");

  ASSERT_THAT_ERROR(writeFile(target.string(), "{}\n"), llvm::Succeeded());
  EXPECT_EQ(contentsOf(victim), "root's file") << "the link's target was written through";
  EXPECT_FALSE(fs::is_symlink(target)) << "the link at the name was replaced";
  EXPECT_EQ(contentsOf(target), "{}\n");
  EXPECT_TRUE(fs::is_symlink(scratch.path / "report.json.tmp")) << "nothing else touched";
  EXPECT_EQ(entriesIn(scratch.path), 3u) << "no temporary file left behind";
}

TEST(Files, ModesAsAsked) {
  ScratchDir scratch;
  mode_t umaskWas = umask(022);
  fs::path shared = scratch.path / "shared", owner = scratch.path / "owner";
  ASSERT_THAT_ERROR(writeFile(shared.string(), "a"), llvm::Succeeded());
  ASSERT_THAT_ERROR(writeFile(owner.string(), "b", FileAccess::OwnerOnly), llvm::Succeeded());
  umask(umaskWas);
  EXPECT_EQ(modeOf(shared), 0644u) << "a shared file is as any new file";
  EXPECT_EQ(modeOf(owner), 0600u) << "a file holding map contents is the owner's alone";
  // Rewriting a file whose mode was widened gives it the asked mode again.
  fs::permissions(owner, fs::perms::all);
  ASSERT_THAT_ERROR(writeFile(owner.string(), "c", FileAccess::OwnerOnly), llvm::Succeeded());
  EXPECT_EQ(modeOf(owner), 0600u);
  EXPECT_EQ(contentsOf(owner), "c");
}

TEST(Files, WriteFailureNamesThePathAndLeavesTheOldFile) {
  ScratchDir scratch;
  fs::path dir = scratch.path / "is-a-directory";
  fs::create_directory(dir);
  llvm::Error err = writeFile(dir.string(), "x");
  ASSERT_THAT_ERROR(std::move(err), llvm::Failed());
  EXPECT_TRUE(fs::is_directory(dir));
  EXPECT_EQ(entriesIn(scratch.path), 1u) << "no temporary file left behind";
  std::string message =
      llvm::toString(writeFile((scratch.path / "missing" / "file").string(), "x"));
  EXPECT_NE(message.find((scratch.path / "missing" / "file").string()), std::string::npos)
      << message;
}

TEST(Files, PrivateDirectoryIsCreatedForUsAlone) {
  ScratchDir scratch;
  fs::path dir = scratch.path / "state" / "reproducers";
  ASSERT_THAT_ERROR(PrivateDirectory::checkIfPresent(dir.string()), llvm::Succeeded())
      << "nothing to check before it exists";
  mode_t umaskWas = umask(0);
  auto opened = PrivateDirectory::open(dir.string());
  umask(umaskWas);
  ASSERT_THAT_EXPECTED(opened, llvm::Succeeded());
  EXPECT_EQ(modeOf(dir), 0700u) << "created for us alone, whatever the umask";
  ASSERT_THAT_ERROR(opened->write("one.json", "{\"maps\": {}}\n"), llvm::Succeeded());
  EXPECT_EQ(modeOf(dir / "one.json"), 0600u);
  EXPECT_EQ(contentsOf(dir / "one.json"), "{\"maps\": {}}\n");
  EXPECT_THAT_ERROR(PrivateDirectory::checkIfPresent(dir.string()), llvm::Succeeded());
  EXPECT_THAT_EXPECTED(PrivateDirectory::open(dir.string()), llvm::Succeeded())
      << "opened again as it is";

  // A link planted at a file's name inside is replaced, not followed.
  fs::path victim = scratch.path / "victim";
  std::ofstream(victim) << "untouched";
  fs::create_symlink(victim, dir / "two.json");
  ASSERT_THAT_ERROR(opened->write("two.json", "{}\n"), llvm::Succeeded());
  EXPECT_EQ(contentsOf(victim), "untouched");
  EXPECT_FALSE(fs::is_symlink(dir / "two.json"));
  EXPECT_EQ(modeOf(dir / "two.json"), 0600u);
  EXPECT_THAT_ERROR(opened->write("../escape", "x"), llvm::Failed());
  EXPECT_FALSE(fs::exists(dir.parent_path() / "escape"));
}

TEST(Files, PrivateDirectoryRefusesWhatOthersCouldReach) {
  ScratchDir scratch;
  auto refusal = [](const fs::path &dir) {
    std::string opening = llvm::toString(PrivateDirectory::open(dir.string()).takeError());
    std::string checking = llvm::toString(PrivateDirectory::checkIfPresent(dir.string()));
    EXPECT_EQ(opening, checking) << "open and check refuse alike";
    return opening;
  };

  fs::path open = scratch.path / "world-writable";
  fs::create_directory(open);
  fs::permissions(open, fs::perms::all);
  std::string said = refusal(open);
  EXPECT_NE(said.find(open.string() + ": mode 0777 lets its group or others in"),
            std::string::npos)
      << said;
  fs::permissions(open, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  said = refusal(open);
  EXPECT_NE(said.find("mode 0750"), std::string::npos) << "group access too: " << said;

  fs::path mine = scratch.path / "mine";
  fs::create_directory(mine);
  fs::permissions(mine, fs::perms::owner_all);
  fs::path link = scratch.path / "link";
  fs::create_symlink(mine, link);
  said = refusal(link);
  EXPECT_NE(said.find(link.string() + ": a symbolic link"), std::string::npos) << said;

  fs::path file = scratch.path / "file";
  std::ofstream(file) << "x";
  said = refusal(file);
  EXPECT_NE(said.find(file.string() + ": not a directory"), std::string::npos) << said;

  if (geteuid() == 0) {
    fs::path theirs = scratch.path / "theirs";
    fs::create_directory(theirs);
    fs::permissions(theirs, fs::perms::owner_all);
    ASSERT_EQ(chown(theirs.c_str(), 65534, 65534), 0);
    said = refusal(theirs);
    EXPECT_NE(said.find(theirs.string() + ": owned by user 65534"), std::string::npos) << said;
  }
  EXPECT_EQ(modeOf(open), 0750u) << "a refused directory is left as it was";
}

} // namespace
} // namespace morpheus
