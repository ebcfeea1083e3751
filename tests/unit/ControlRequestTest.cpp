// Control-socket requests checked before anything runs (runtime/ControlRequest)
// and where `morpheus run` puts its socket by default; the socket itself,
// with every JSON type in every field, is tested in kernel/ControlServerTest.
#include "runtime/ControlRequest.h"
#include "runtime/ControlServer.h"

#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>

namespace morpheus::runtime {
namespace {

std::string errorOf(std::string_view line) {
  auto parsed = parseControlRequest(line);
  if (parsed)
    return "parsed";
  return llvm::toString(parsed.takeError());
}

TEST(ControlRequest, ValidRequestsAreTyped) {
  auto update = parseControlRequest(
      R"({"op":"update","map":"policy","key":"0a 00 00 01","value":["0x02"],"flags":1})");
  ASSERT_THAT_EXPECTED(update, llvm::Succeeded());
  EXPECT_EQ(update->op, ControlOp::Update);
  EXPECT_EQ(update->map, "policy");
  EXPECT_EQ(update->key, (Bytes{0x0a, 0, 0, 1}));
  EXPECT_EQ(update->value, (Bytes{2}));
  EXPECT_EQ(update->flags, 1u);
  auto largest = parseControlRequest(
      R"({"op":"update","map":"m","key":"00","value":"00","flags":18446744073709551615})");
  ASSERT_THAT_EXPECTED(largest, llvm::Succeeded());
  EXPECT_EQ(largest->flags, UINT64_MAX);
  auto remove = parseControlRequest(R"({"key":"00","op":"delete","map":"m"})");
  ASSERT_THAT_EXPECTED(remove, llvm::Succeeded());
  EXPECT_EQ(remove->op, ControlOp::Delete);
  auto status = parseControlRequest(R"( {"op":"status"} )");
  ASSERT_THAT_EXPECTED(status, llvm::Succeeded());
  EXPECT_EQ(status->op, ControlOp::Status);
  EXPECT_EQ(status->program, "");
}

// The agent serves many programs on one socket: a request names its
// program; `reload` takes nothing else.
TEST(ControlRequest, RequestsNameTheirProgramAndReloadTakesNothingElse) {
  auto update = parseControlRequest(
      R"({"op":"update","program":"edge_fw","map":"policy","key":"00","value":"01"})");
  ASSERT_THAT_EXPECTED(update, llvm::Succeeded());
  EXPECT_EQ(update->program, "edge_fw");
  auto status = parseControlRequest(R"({"op":"status","program":"lb"})");
  ASSERT_THAT_EXPECTED(status, llvm::Succeeded());
  EXPECT_EQ(status->program, "lb");
  auto history = parseControlRequest(R"({"op":"history","program":"lb"})");
  ASSERT_THAT_EXPECTED(history, llvm::Succeeded());
  EXPECT_EQ(history->op, ControlOp::History);
  EXPECT_EQ(history->program, "lb");
  EXPECT_EQ(errorOf(R"({"op":"history","map":"policy"})"),
            "\"map\": not a field of op 'history' (it takes op, program)");
  auto reload = parseControlRequest(R"({"op":"reload"})");
  ASSERT_THAT_EXPECTED(reload, llvm::Succeeded());
  EXPECT_EQ(reload->op, ControlOp::Reload);
  EXPECT_EQ(errorOf(R"({"op":"status","program":""})"),
            "\"program\": expected a program name, got an empty string");
  EXPECT_EQ(errorOf(R"({"op":"status","program":7})"),
            "\"program\": expected a program name, got the integer 7");
  EXPECT_EQ(errorOf(R"({"op":"reload","program":"lb"})"),
            "\"program\": not a field of op 'reload' (it takes op)");
}

// `handover` (the next agent asking this one to leave) concerns the whole
// agent: it names no program.
TEST(ControlRequest, HandoverTakesNothingElse) {
  auto handover = parseControlRequest(R"({"op":"handover"})");
  ASSERT_THAT_EXPECTED(handover, llvm::Succeeded());
  EXPECT_EQ(handover->op, ControlOp::Handover);
  EXPECT_EQ(errorOf(R"({"op":"handover","program":"lb"})"),
            "\"program\": not a field of op 'handover' (it takes op)");
}

// Each message names the field and what it got; before, "flags":1.5 was 1,
// and a wrong type in "op" or "flags" threw out of the server.
TEST(ControlRequest, ErrorsNameTheFieldAndWhatItGot) {
  const std::string update = R"({"op":"update","map":"m","key":"00","value":"00",)";
  EXPECT_EQ(errorOf(update + R"("flags":1.5})"),
            "\"flags\": expected an integer from 0 to 18446744073709551615, got the number 1.5");
  EXPECT_EQ(errorOf(update + R"("flags":-1})"),
            "\"flags\": expected an integer from 0 to 18446744073709551615, got the integer -1");
  EXPECT_EQ(errorOf(update + R"("flags":18446744073709551616})"),
            "\"flags\": expected an integer from 0 to 18446744073709551615, got the number "
            "1.8446744073709552e+19");
  EXPECT_EQ(errorOf(update + R"("flags":"x"})"),
            "\"flags\": expected an integer from 0 to 18446744073709551615, got a string");
  EXPECT_EQ(errorOf(R"({"op":5})"), "\"op\": expected a string (update, delete, status, history, "
                                    "reload, handover), got the integer 5");
  EXPECT_EQ(
      errorOf(R"({"op":null})"),
      "\"op\": expected a string (update, delete, status, history, reload, handover), got null");
  EXPECT_EQ(errorOf(R"({"op":"update","map":5,"key":"00","value":"00"})"),
            "\"map\": expected a map name, got the integer 5");
  EXPECT_EQ(errorOf(R"({"op":"update","map":"","key":"00","value":"00"})"),
            "\"map\": expected a map name, got an empty string");
  EXPECT_EQ(errorOf(R"({"op":"delete","map":"m","key":"0a0"})"),
            "\"key\": '0a0' has an odd number of hex digits");
  EXPECT_EQ(errorOf(R"({"op":"delete","map":"m","key":[]})"), "\"key\": no bytes given");
  EXPECT_EQ(errorOf(R"({"op":"delete","map":"m","key":{}})"),
            "\"key\": expected a hex string or an array of hex bytes");
  EXPECT_EQ(errorOf(R"({"op":"delete","map":"m"})"),
            "\"key\": missing (op 'delete' takes op, program, map, key)");
  EXPECT_EQ(errorOf(R"({"op":"delete","map":"m","key":"00","value":"00"})"),
            "\"value\": not a field of op 'delete' (it takes op, program, map, key)");
  EXPECT_EQ(errorOf(update + R"("flag":1})"),
            "\"flag\": not a field of op 'update' (it takes op, program, map, key, value, flags)");
  EXPECT_EQ(errorOf(R"({"op":"explode"})"),
            "\"op\": unknown op 'explode' (update, delete, status, history, reload, handover)");
  EXPECT_EQ(errorOf(R"({})"),
            "\"op\": missing (update, delete, status, history, reload, handover)");
  EXPECT_EQ(errorOf(R"([1,2])"),
            "expected a JSON object like {\"op\":\"status\"}, got an array");
  EXPECT_EQ(errorOf("{\"op\": \"upd"), "not a JSON object: '{\"op\": \"upd'");
}

// What a client sent is quoted short and as printable ASCII (bytes that are
// not: \xNN), so a reply is always valid JSON text and one line.
TEST(ControlRequest, QuotesAreShortAndPrintable) {
  EXPECT_EQ(errorOf("{\"op\":\"delete\",\"map\":\"m\",\"key\":\"\xc3\xa9\"}"),
            "\"key\": unexpected character '\\xc3' in hex bytes \"\\xc3\\xa9\"");
  EXPECT_EQ(
      errorOf("{\"op\":\"\xc3\xa9\\n\"}"),
      "\"op\": unknown op '\\xc3\\xa9\\x0a' (update, delete, status, history, reload, handover)");
  EXPECT_EQ(errorOf("{\"op\":\"\xff\"}"), "not a JSON object: '{\"op\":\"\\xff\"}'");
  std::string longOp = "{\"op\":\"" + std::string(1000, 'a') + "\"}";
  EXPECT_EQ(errorOf(longOp), "\"op\": unknown op '" + std::string(64, 'a') +
                                 "...' (update, delete, status, history, reload, handover)");
}

TEST(ControlRequest, TheDefaultSocketFollowsThePinDirectory) {
  EXPECT_EQ(defaultControlSocket("policy_fwd", "/sys/fs/bpf/morpheus/policy_fwd"),
            "/run/morpheus/policy_fwd.sock");
  EXPECT_EQ(defaultControlSocket("policy_fwd", "/sys/fs/bpf/morpheus/./policy_fwd/"),
            "/run/morpheus/policy_fwd.sock");
  std::string a = defaultControlSocket("policy_fwd", "/sys/fs/bpf/tenant_a");
  std::string b = defaultControlSocket("policy_fwd", "/sys/fs/bpf/tenant_b");
  EXPECT_NE(a, b) << "two pin directories, two sockets";
  EXPECT_EQ(a.rfind("/run/morpheus/policy_fwd-", 0), 0u) << a;
  EXPECT_EQ(a.size(), std::string("/run/morpheus/policy_fwd-12345678.sock").size()) << a;
  EXPECT_EQ(a, defaultControlSocket("policy_fwd", "/sys/fs/bpf/tenant_a/"));
}

} // namespace
} // namespace morpheus::runtime
