#include "runtime/ContextSamples.h"

#include "core/ContextReads.h"
#include "runtime/PacketSamples.h"
#include "support/Netns.h"

#include <llvm/ADT/STLExtras.h>

#include <algorithm>
#include <optional>

namespace morpheus::runtime {

namespace {

using Kind = bpf::ContextField::Kind;

// Whether the program's reads at `offset` cover a byte of `field`.
bool overlaps(const core::ContextRead &read, const bpf::ContextField &field) {
  return read.offset < field.offset + field.width && field.offset < read.offset + read.width;
}

uint64_t widthMask(uint32_t width) {
  return width >= 8 ? ~0ull : (1ull << (8 * width)) - 1;
}

template <typename T> const T &pick(std::mt19937_64 &rng, const std::vector<T> &values) {
  return values[rng() % values.size()];
}

} // namespace

Expected<ContextPlan> planContext(const bpf::ProgramSpec &spec, const std::string &entry,
                                  bool zeroed) {
  ContextPlan plan;
  plan.type = spec.programType(entry);
  if (zeroed)
    return plan;
  // Stages reached by tail calls get the same context: what any program of
  // the object reads counts.
  core::ContextReads reads;
  for (const std::string &program : spec.programs()) {
    const llvm::Function *function = spec.module().getFunction(program);
    if (!function || spec.programType(program) != plan.type)
      continue;
    core::ContextReads found = core::contextReads(*function);
    reads.escapes |= found.escapes;
    for (auto &[offset, read] : found.fields) {
      core::ContextRead &merged = reads.fields[offset];
      merged.offset = offset;
      merged.width = std::max(merged.width, read.width);
      merged.singledOut.insert(read.singledOut.begin(), read.singledOut.end());
    }
  }
  for (const bpf::ContextField &field : bpf::settableContextFields(plan.type)) {
    ContextPlan::Field drawn{field, {}};
    bool read = reads.escapes;
    for (const auto &[offset, found] : reads.fields)
      if (overlaps(found, field)) {
        read = true;
        // A test of the field's own bytes: its values, as the field holds them.
        if (found.offset == field.offset)
          for (uint64_t value : found.singledOut)
            drawn.singledOut.push_back(value & widthMask(field.width));
      }
    if (read)
      plan.fields.push_back(std::move(drawn));
  }
  bool needsDevices = llvm::any_of(plan.fields, [](const ContextPlan::Field &drawn) {
    return drawn.field.kind == Kind::Device;
  });
  if (needsDevices) {
    auto devices = netns::interfaces();
    if (!devices)
      return devices.takeError();
    for (const netns::Interface &device : *devices)
      plan.devices[device.index] = std::max<uint32_t>(device.receiveQueues, 1);
  }
  return plan;
}

ContextValues drawContext(const ContextPlan &plan, std::mt19937_64 &rng, size_t packetLength,
                          const std::function<uint64_t(size_t width)> &fromTables) {
  ContextValues values;
  std::optional<uint32_t> device; // drawn first: the queue depends on it
  auto value = [&](const ContextPlan::Field &drawn) -> uint64_t {
    const bpf::ContextField &field = drawn.field;
    uint64_t mask = widthMask(field.width);
    switch (rng() % 8) {
    case 0:
    case 1:
      return 0;
    case 2:
    case 3:
    case 4:
      if (!drawn.singledOut.empty())
        return pick(rng, drawn.singledOut);
      [[fallthrough]];
    case 5:
      return fromTables(field.width) & mask;
    default:
      return biased(rng, field.width) & mask;
    }
  };
  for (const ContextPlan::Field &drawn : plan.fields) {
    if (drawn.field.kind != Kind::Device)
      continue;
    // An interface of the namespace, one the program names first; none
    // (0) at times.
    std::vector<uint64_t> named;
    for (uint64_t index : drawn.singledOut)
      if (plan.devices.count(uint32_t(index)))
        named.push_back(index);
    std::vector<uint32_t> all;
    for (const auto &[index, queues] : plan.devices)
      all.push_back(index);
    unsigned choice = rng() % 8;
    if (choice == 0 || all.empty())
      device = 0;
    else if (choice < 4 && !named.empty())
      device = uint32_t(pick(rng, named));
    else
      device = pick(rng, all);
    values[drawn.field.name] = *device;
  }
  for (const ContextPlan::Field &drawn : plan.fields) {
    const bpf::ContextField &field = drawn.field;
    switch (field.kind) {
    case Kind::Device:
      break;
    case Kind::ReceiveQueue: {
      // Beyond the device's queues (or with no device) the run fails.
      auto queues = device ? plan.devices.find(*device) : plan.devices.end();
      uint32_t count = queues == plan.devices.end() ? 1 : queues->second;
      uint64_t queue = value(drawn);
      values[field.name] = queue < count ? queue : rng() % count;
      break;
    }
    case Kind::WireLength: {
      // 0 (the packet's own length) or what the wire carried, at least the
      // packet and at most 64 KiB.
      uint64_t length = value(drawn);
      if (length && (length < packetLength || length > 65536))
        length = std::min<uint64_t>(65536, packetLength + rng() % 1500);
      values[field.name] = length;
      break;
    }
    case Kind::GsoSegments:
      values[field.name] = value(drawn) & 0xffff;
      break;
    case Kind::Any:
      values[field.name] = value(drawn);
      break;
    }
  }
  return values;
}

} // namespace morpheus::runtime
