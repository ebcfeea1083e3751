// llvm-19-dev ships LLVM's error matchers (llvm/Testing/Support/Error.h:
// ASSERT_THAT_EXPECTED, ASSERT_THAT_ERROR, Succeeded, Failed, HasValue) but
// not the library behind them, libLLVMTestingSupport. The matchers need one
// function from it, defined here: the errors of an Error, kept so a failed
// assertion can print them.
#include <llvm/Testing/Support/Error.h>

namespace llvm::detail {

ErrorHolder TakeError(Error err) {
  ErrorHolder holder;
  handleAllErrors(std::move(err), [&](std::unique_ptr<ErrorInfoBase> info) {
    holder.Infos.push_back(std::move(info));
  });
  return holder;
}

} // namespace llvm::detail
