// support/Error.h: context added on the way up keeps an error's class and
// data, so a caller far from where it was made still decides on its type.
#include "support/Error.h"
#include "support/VerifierRejection.h"

#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>

namespace morpheus {
namespace {

const char *const Log = "0: R1=ctx() R10=fp0\n"
                        "0: (61) r2 = *(u32 *)(r1 +0)\n"
                        "invalid access to packet, off=0 size=4\n"
                        "processed 3 insns (limit 1000000) max_states_per_insn 0\n";

Error refusal() { return llvm::make_error<VerifierRejection>("fw", "fw_prog", -EACCES, Log); }

TEST(WithContext, KeepsAVerifierRejectionWithItsLog) {
  Error err = withContext(withContext(refusal(), "fw.bpf.c"), "cycle 3");
  ASSERT_TRUE(err.isA<VerifierRejection>()) << "the class survives two contexts";
  bool handled = false;
  llvm::handleAllErrors(std::move(err), [&](const VerifierRejection &refused) {
    handled = true;
    EXPECT_EQ(refused.object(), "fw");
    EXPECT_EQ(refused.program(), "fw_prog");
    EXPECT_EQ(refused.errorNumber(), EACCES);
    EXPECT_EQ(refused.verifierLog(), Log);
    EXPECT_EQ(refused.reason(), "invalid access to packet, off=0 size=4 / processed 3 insns "
                                "(limit 1000000) max_states_per_insn 0");
    EXPECT_EQ(refused.convertToErrorCode(), std::errc::permission_denied);
    std::string message = refused.message();
    EXPECT_EQ(message.rfind("cycle 3: fw.bpf.c: object 'fw': load failed: the kernel refused "
                            "program 'fw_prog': ",
                            0),
              0u)
        << message;
    EXPECT_NE(message.find(Log), std::string::npos) << "the log follows: " << message;
  });
  EXPECT_TRUE(handled);
}

TEST(WithContext, KeepsExpectedsTypedErrors) {
  Expected<int> failed = withContext(Expected<int>(refusal()), "version 2");
  ASSERT_FALSE(bool(failed));
  Error err = failed.takeError();
  EXPECT_TRUE(err.isA<VerifierRejection>());
  llvm::consumeError(std::move(err));
  Expected<int> value = withContext(Expected<int>(7), "version 2");
  ASSERT_THAT_EXPECTED(value, llvm::HasValue(7));
}

// An error of no class of ours stays a string error with its code.
TEST(WithContext, KeepsTheCodeOfOtherErrors) {
  Error err = withContext(makeSystemError(-ENODEV, "no interface 'veth9'"), "daemon");
  EXPECT_FALSE(err.isA<VerifierRejection>());
  ErrorDetails details = takeErrorDetails(std::move(err));
  EXPECT_EQ(details.code, std::errc::no_such_device);
  EXPECT_EQ(details.message, std::string("daemon: no interface 'veth9': ") + strerror(ENODEV));
  EXPECT_THAT_ERROR(withContext(Error::success(), "daemon"), llvm::Succeeded());
}

// Every error of a list gets the context; each keeps its class.
TEST(WithContext, PrefixesEveryErrorOfAList) {
  Error err = withContext(llvm::joinErrors(makeError("copy one"), refusal()), "copies");
  bool sawRejection = false;
  std::vector<std::string> messages;
  llvm::handleAllErrors(
      std::move(err),
      [&](const VerifierRejection &refused) {
        sawRejection = true;
        messages.push_back(refused.message().substr(0, 16));
      },
      [&](const llvm::ErrorInfoBase &other) { messages.push_back(other.message()); });
  EXPECT_TRUE(sawRejection);
  EXPECT_EQ(messages, (std::vector<std::string>{"copies: copy one", "copies: object '"}));
}

// A log of one line is its own reason.
TEST(VerifierRejection, AOneLineLogIsTheReason) {
  VerifierRejection refused("o", "p", EINVAL, "last insn is not an exit or jmp\n");
  EXPECT_EQ(refused.reason(), "last insn is not an exit or jmp");
}

} // namespace
} // namespace morpheus
