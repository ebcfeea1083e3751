#include "runtime/Handover.h"

#include "runtime/ControlClient.h"

#include <llvm/Support/FormatVariadic.h>

#include <optional>
#include <system_error>
#include <thread>

namespace morpheus::runtime {

namespace {

// How often the claim is tried again while the old agent stops.
constexpr std::chrono::milliseconds ClaimRetry{20};

// A claim, or why not; `held` says whether another process holds the path
// (the one case worth waiting for).
struct ClaimTry {
  std::optional<ControlSocketClaim> claim;
  bool held = false;
  ErrorDetails refusal;
};

ClaimTry tryClaim(const std::string &path) {
  auto claimed = ControlSocketClaim::claim(path);
  if (claimed)
    return {std::move(*claimed), false, {}};
  ErrorDetails refusal = takeErrorDetails(claimed.takeError());
  bool held = refusal.code == std::errc::address_in_use;
  return {std::nullopt, held, std::move(refusal)};
}

Error asError(const ErrorDetails &details) {
  return llvm::createStringError(details.code, "%s", details.message.c_str());
}

} // namespace

Expected<TakenOver> takeOverControlSocket(const std::string &path,
                                          std::chrono::milliseconds limit) {
  ClaimTry first = tryClaim(path);
  if (first.claim)
    return TakenOver{std::move(*first.claim), 0};
  if (!first.held)
    return asError(first.refusal);
  auto reply = askControlSocket(path, {{"op", "handover"}}, limit);
  if (!reply) {
    // It may have stopped on its own between the claim and the request.
    ClaimTry again = tryClaim(path);
    if (again.claim) {
      llvm::consumeError(reply.takeError());
      return TakenOver{std::move(*again.claim), 0};
    }
    return withContext(reply.takeError(), "taking over from the agent at '" + path + "'");
  }
  auto pid = reply->find("pid");
  pid_t from = pid != reply->end() && pid->is_number_integer() ? pid_t(pid->get<int64_t>()) : 0;
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    ClaimTry next = tryClaim(path);
    if (next.claim)
      return TakenOver{std::move(*next.claim), from};
    if (!next.held)
      return asError(next.refusal);
    if (std::chrono::steady_clock::now() >= deadline)
      return makeError("control socket '{0}': process {1} agreed to hand over but still holds "
                       "the socket after {2} ms: {3}",
                       path, from, limit.count(), next.refusal.message);
    std::this_thread::sleep_for(ClaimRetry);
  }
}

} // namespace morpheus::runtime
