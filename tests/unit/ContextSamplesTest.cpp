// What the context of a sample packet is drawn from (runtime/ContextSamples):
// the settable fields a program reads, each from zero, the values its tests
// single out and others; device fields from the namespace's interfaces, a
// receive queue only below the drawn device's count. No kernel needed: the
// programs are compiled, not loaded, and the devices are given.
#include "runtime/ContextSamples.h"

#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>

#include <map>
#include <set>

namespace morpheus::runtime {
namespace {

std::string corpus(const std::string &file) {
  return std::string(MORPHEUS_SOURCE_DIR) + "/tests/programs/" + file;
}

std::map<std::string, std::vector<uint64_t>> planned(const ContextPlan &plan) {
  std::map<std::string, std::vector<uint64_t>> fields;
  for (const ContextPlan::Field &field : plan.fields)
    fields[field.field.name] = field.singledOut;
  return fields;
}

// Every value each field took over `draws` contexts.
std::map<std::string, std::set<uint64_t>> drawn(const ContextPlan &plan, unsigned draws) {
  std::mt19937_64 rng(3);
  std::map<std::string, std::set<uint64_t>> values;
  for (unsigned i = 0; i < draws; ++i)
    for (const auto &[name, value] : drawContext(plan, rng, 64, [](size_t) { return 77; }))
      values[name].insert(value);
  return values;
}

TEST(ContextSamples, TcFieldsTheProgramTestsAreDrawnWithTheirValues) {
  auto spec = bpf::ProgramSpec::load(corpus("tc_health_check.bpf.c"), {});
  ASSERT_THAT_EXPECTED(spec, llvm::Succeeded());
  auto plan = planContext(**spec, "health_check", false);
  ASSERT_THAT_EXPECTED(plan, llvm::Succeeded());
  auto fields = planned(*plan);
  ASSERT_EQ(fields.size(), 2u) << "mark and priority, nothing else";
  EXPECT_EQ(fields["mark"], std::vector<uint64_t>{0x4843});
  EXPECT_EQ(fields["priority"], std::vector<uint64_t>{6});
  auto values = drawn(*plan, 400);
  for (const char *field : {"mark", "priority"}) {
    EXPECT_TRUE(values[field].count(0)) << field << ": zero";
    EXPECT_TRUE(values[field].count(77)) << field << ": a number of the tables";
    EXPECT_GT(values[field].size(), 3u) << field << ": random numbers too";
  }
  EXPECT_TRUE(values["mark"].count(0x4843));
  EXPECT_TRUE(values["priority"].count(6));

  auto zeroed = planContext(**spec, "health_check", true);
  ASSERT_THAT_EXPECTED(zeroed, llvm::Succeeded());
  EXPECT_TRUE(zeroed->fields.empty());
  EXPECT_TRUE(drawn(*zeroed, 10).empty());
}

TEST(ContextSamples, ReceiveQueuesAreDrawnBelowTheDevicesQueues) {
  auto spec = bpf::ProgramSpec::load(corpus("xdp_queue_gate.bpf.c"), {});
  ASSERT_THAT_EXPECTED(spec, llvm::Succeeded());
  auto plan = planContext(**spec, "queue_gate", false);
  ASSERT_THAT_EXPECTED(plan, llvm::Succeeded());
  auto fields = planned(*plan);
  ASSERT_EQ(fields.size(), 2u);
  EXPECT_EQ(fields["rx_queue_index"], std::vector<uint64_t>{2});
  EXPECT_TRUE(fields.count("ingress_ifindex"));
  // Devices as a namespace might have them: lo (1 queue), a veth of 4.
  plan->devices = {{1, 1}, {7, 4}};
  std::mt19937_64 rng(5);
  std::set<std::pair<uint64_t, uint64_t>> seen;
  for (unsigned i = 0; i < 400; ++i) {
    ContextValues values = drawContext(*plan, rng, 64, [](size_t) { return 77; });
    uint64_t device = values.at("ingress_ifindex"), queue = values.at("rx_queue_index");
    ASSERT_TRUE(device == 0 || device == 1 || device == 7) << device;
    ASSERT_LT(queue, device == 7 ? 4u : 1u) << "device " << device;
    seen.insert({device, queue});
  }
  EXPECT_TRUE(seen.count({7, 2})) << "the queue the program tests, on the device that has it";
  EXPECT_TRUE(seen.count({0, 0}));
  EXPECT_TRUE(seen.count({1, 0}));
}

} // namespace
} // namespace morpheus::runtime
