#include "runtime/PacketSamples.h"

#include "backend/bpf/MapIO.h"
#include "backend/bpf/TestRun.h"
#include "support/packet/Packet.h"

#include <linux/bpf.h>

#include <llvm/ADT/STLExtras.h>
#include <llvm/Support/SwapByteOrder.h>

#include <algorithm>
#include <cstring>

namespace morpheus::runtime {

using core::Bytes;

uint64_t biased(Rng &rng, uint32_t width, const std::vector<uint64_t> &compared) {
  uint64_t ones = width >= 8 ? ~0ull : (1ull << (8 * width)) - 1;
  switch (rng() % 16) {
  case 0:
  case 1:
  case 2:
  case 3:
    return 0; // padding and unused fields are zero far more often than not
  case 4:
  case 5:
    return 1;
  case 6:
  case 7:
  case 8:
    return (2 + rng() % 16) & ones; // 6 and 17 included: TCP, UDP
  case 9:
    return ones;
  case 10: {
    // Shift counts and sizes around each operand width.
    static const uint64_t widths[] = {7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 255, 256};
    return widths[rng() % std::size(widths)] & ones;
  }
  case 11: {
    uint64_t sign = 1ull << (8 * std::min(width, 8u) - 1);
    return (rng() % 2 ? sign : sign - 1) & ones; // the signed minimum and maximum
  }
  case 12:
  case 13:
    if (!compared.empty())
      return compared[rng() % compared.size()] & ones;
    [[fallthrough]];
  default:
    return rng() & ones;
  }
}

namespace {

// Header fields a packet can carry that may match one map key: its 4-, 2-
// and 1-byte integer fields in order (BTF), or for maps without BTF the
// aligned words of the key (an LPM key's data starts after its prefix length).
struct KeyFields {
  std::vector<uint64_t> words, halves, bytes; // as the packet carries them
};

uint64_t networkOrder(const Bytes &bytes, size_t at, size_t width) {
  uint64_t value = 0; // the packet holds the bytes in key order
  for (size_t i = 0; i < width; ++i)
    value = value << 8 | bytes[at + i];
  return value;
}

KeyFields fieldsOf(const KeyedTable &map, const Bytes &key) {
  KeyFields fields;
  std::vector<Field> layout = map.keyFields;
  if (layout.empty())
    for (uint32_t at = map.type == BPF_MAP_TYPE_LPM_TRIE ? 4 : 0; at + 4 <= key.size(); at += 4)
      layout.push_back({at, 4});
  for (Field field : layout) {
    if (field.offset + field.width > key.size())
      continue;
    uint64_t value = networkOrder(key, field.offset, field.width);
    if (field.width == 4)
      fields.words.push_back(value);
    else if (field.width == 2)
      fields.halves.push_back(value);
    else if (field.width == 1)
      fields.bytes.push_back(value);
  }
  return fields;
}

// Every `width` consecutive bytes of some keys and values, as one list:
// kept as the byte strings and where each one's windows begin in the
// list, not copied out window by window (a firewall's 16,386 rule sets of
// 520 bytes would make 25 million copies a cycle).
class BytePool {
public:
  explicit BytePool(size_t width) : width(width) {}
  void add(const Bytes &bytes) {
    if (bytes.size() < width)
      return;
    sources.push_back(&bytes);
    starts.push_back(total);
    total += bytes.size() - width + 1;
  }
  bool empty() const { return total == 0; }
  size_t size() const { return total; }
  // The window at position `i` of the list, as an integer in network order.
  uint64_t at(size_t i) const {
    auto [bytes, offset] = window(i);
    return networkOrder(*bytes, offset, width);
  }
  // The same window as the host reads it (a number a table holds).
  uint64_t hostAt(size_t i) const {
    auto [bytes, offset] = window(i);
    uint64_t value = 0;
    for (size_t k = 0; k < width && k < 8; ++k) {
      size_t shift = llvm::sys::IsLittleEndianHost ? k : width - 1 - k;
      value |= uint64_t((*bytes)[offset + k]) << (8 * shift);
    }
    return value;
  }

private:
  std::pair<const Bytes *, size_t> window(size_t i) const {
    size_t source = std::upper_bound(starts.begin(), starts.end(), i) - starts.begin() - 1;
    return {sources[source], i - starts[source]};
  }

  size_t width;
  size_t total = 0;
  std::vector<const Bytes *> sources;
  std::vector<size_t> starts;
};

} // namespace

std::vector<SamplePacket> synthesizePackets(const std::vector<KeyedTable> &tables, Rng &rng,
                                            uint32_t count, const ContextPlan &context) {
  // Packets aimed at map keys (addresses, ports, protocol, MACs taken from a
  // key or value) are what makes lookups hit; random ones cover the rest.
  std::vector<KeyFields> targets;
  BytePool pool2(2), pool4(4), pool6(6);
  for (const KeyedTable &table : tables) {
    for (const auto &[key, value] : table.entries) {
      if (!bpf::isArrayMap(table.type))
        targets.push_back(fieldsOf(table, key));
      for (const Bytes *bytes : {&key, &value})
        for (BytePool *pool : {&pool2, &pool4, &pool6})
          pool->add(*bytes);
    }
  }
  auto fromPool = [&](const BytePool &pool, size_t width) -> uint64_t {
    if (pool.empty() || rng() % 4 == 0)
      return biased(rng, width);
    return pool.at(rng() % pool.size());
  };
  auto mac = [&] {
    uint64_t value = rng() % 8 == 0 ? 0xffffffffffffull : fromPool(pool6, 6);
    packet::Mac bytes;
    for (int i = 0; i < 6; ++i)
      bytes[i] = uint8_t(value >> (8 * (5 - i)));
    return bytes;
  };
  auto synthesizePacket = [&]() -> Bytes {
    unsigned kind = rng() % 8;
    if (kind == 7) {
      Bytes random(1 + rng() % 128);
      for (uint8_t &byte : random)
        byte = uint8_t(rng());
      if (random.size() >= 14 && rng() % 2) {
        uint16_t types[] = {0x0800, 0x86dd, 0x8100, 0x0806};
        uint16_t type = types[rng() % 4];
        random[12] = type >> 8;
        random[13] = uint8_t(type);
      }
      return random;
    }
    uint32_t saddr = fromPool(pool4, 4), daddr = fromPool(pool4, 4);
    uint16_t sport = fromPool(pool2, 2), dport = fromPool(pool2, 2);
    unsigned l4 = rng() % 3;
    if (!targets.empty() && rng() % 4 != 0) {
      // One key's fields, last first: a lone address or port in a key is
      // more often the destination.
      const KeyFields &target = targets[rng() % targets.size()];
      if (!target.words.empty())
        daddr = target.words.back();
      if (target.words.size() > 1)
        saddr = target.words[target.words.size() - 2];
      if (!target.halves.empty())
        dport = target.halves.back();
      if (target.halves.size() > 1)
        sport = target.halves[target.halves.size() - 2];
      if (rng() % 4 == 0) {
        std::swap(saddr, daddr);
        std::swap(sport, dport);
      }
      for (uint64_t byte : target.bytes)
        if (byte == 17 || byte == 6 || byte == 1)
          l4 = byte == 17 ? 0 : byte == 6 ? 1 : 2;
    }
    packet::PacketBuilder builder;
    builder.ethernet(mac(), mac());
    if (kind == 5)
      builder.vlan(uint16_t(fromPool(pool2, 2) & 0xfff), rng() % 8);
    if (kind == 6) {
      packet::Ipv6Options ip;
      for (auto *address : {&ip.saddr, &ip.daddr})
        for (uint8_t &byte : *address)
          byte = rng() % 2 ? uint8_t(rng()) : 0;
      ip.hopLimit = biased(rng, 1);
      builder.ipv6(ip);
    } else {
      packet::Ipv4Options ip;
      ip.saddr = saddr;
      ip.daddr = daddr;
      ip.ttl = rng() % 2 ? 64 : biased(rng, 1);
      if (rng() % 8 == 0)
        ip.fragment = rng() % 2 ? 0x2000 : uint16_t(rng() & 0x3fff);
      if (rng() % 8 == 0)
        ip.optionWords = 1 + rng() % 3;
      builder.ipv4(ip);
    }
    if (l4 == 0)
      builder.udp(sport, dport);
    else if (l4 == 1)
      builder.tcp(sport, dport, uint8_t(rng()));
    else
      builder.icmpEcho(sport, dport, rng() % 2);
    builder.payload(rng() % 64, uint8_t(rng()));
    Bytes built = builder.build();
    if (rng() % 4 == 0) {
      // Cut at (or one byte around) a header boundary: bounds checks.
      static const size_t cuts[] = {1, 6, 12, 13, 14, 15, 17, 18, 19, 22, 33, 34, 35,
                                    37, 38, 39, 41, 42, 43, 53, 54, 55, 57, 58, 62};
      size_t cut = cuts[rng() % std::size(cuts)];
      if (cut < built.size())
        built.resize(cut);
    }
    return built;
  };
  // Numbers the tables hold, for context fields (a mark compared with a
  // configured one).
  auto fromTables = [&](size_t width) -> uint64_t {
    const BytePool &pool = width >= 4 ? pool4 : pool2;
    if (pool.empty())
      return biased(rng, uint32_t(width));
    return pool.hostAt(rng() % pool.size());
  };
  std::vector<SamplePacket> steps;
  for (uint32_t i = 0; i < count; ++i) {
    SamplePacket &step = steps.emplace_back();
    step.packet = synthesizePacket();
    step.context = drawContext(context, rng, step.packet.size(), fromTables);
    step.randomSeed = rng();
  }
  return steps;
}

namespace {

// The context a run starts from: `values` at their fields, zeros elsewhere.
Expected<Bytes> contextOf(bpf::ProgramType type, const ContextValues &values) {
  Bytes context(bpf::contextSize(type), 0);
  for (const auto &[name, value] : values) {
    llvm::ArrayRef<bpf::ContextField> fields = bpf::settableContextFields(type);
    const auto *field = llvm::find_if(
        fields, [&](const bpf::ContextField &known) { return name == known.name; });
    if (field == fields.end())
      return makeError("context field '{0}': not one a {1} run can set", name,
                       bpf::programTypeName(type));
    for (uint32_t i = 0; i < field->width; ++i) // as the host stores it
      context[field->offset + (llvm::sys::IsLittleEndianHost ? i : field->width - 1 - i)] =
          uint8_t(value >> (8 * i));
  }
  return context;
}

Expected<PacketResult> runXdp(int programFd, const SamplePacket &step) {
  // BPF_PROG_TEST_RUN wants at least an Ethernet header of input; a shorter
  // packet is padded and the context's data_end cuts the padding off.
  const size_t minimum = 14;
  size_t padding = step.packet.size() < minimum ? minimum - step.packet.size() : 0;
  Bytes input = step.packet;
  input.resize(step.packet.size() + padding, 0);
  auto context = contextOf(bpf::ProgramType::Xdp, step.context);
  if (!context)
    return context.takeError();
  xdp_md md;
  std::memcpy(&md, context->data(), sizeof(md));
  md.data_end = step.packet.size();
  bpf::TestRunInput run;
  run.packet = input;
  run.packetRoom = input.size() + 512;
  run.context = byteView(md);
  run.keepContext = true;
  auto ran = bpf::testRun(programFd, run);
  if (!ran)
    return withContext(ran.takeError(), "XDP, context " + toHex(*context));
  PacketResult outcome;
  outcome.verdict = ran->verdict;
  outcome.output = std::move(ran->packet);
  size_t length = outcome.output.size();
  outcome.output.resize(length >= padding ? length - padding : 0);
  outcome.context = std::move(ran->context);
  return outcome;
}

// The shortest input BPF_PROG_TEST_RUN makes an skb of: an Ethernet
// header, and behind an IPv4 or IPv6 ethertype a whole IP header.
// `packet` is at least an Ethernet header long.
size_t shortestSkb(const Bytes &packet) {
  const size_t ethernet = 14;
  uint16_t etherType = uint16_t(packet[12] << 8 | packet[13]);
  if (etherType == 0x0800)
    return ethernet + 20;
  if (etherType == 0x86dd)
    return ethernet + 40;
  return ethernet;
}

Expected<PacketResult> runTc(int programFd, const SamplePacket &step) {
  // The kernel refuses to build an skb shorter than shortestSkb, and the
  // skb context has no data_end to cut padding off: the padded packet is
  // the input, the same for every version compared.
  Bytes input = step.packet;
  input.resize(std::max<size_t>(input.size(), 14), 0); // the ethertype padded too
  input.resize(std::max(input.size(), shortestSkb(input)), 0);
  auto context = contextOf(bpf::ProgramType::Tc, step.context);
  if (!context)
    return context.takeError();
  __sk_buff skb;
  std::memcpy(&skb, context->data(), sizeof(skb));
  // What the wire carried is at least what the run is given: the padding
  // counts.
  if (skb.wire_len && skb.wire_len < input.size())
    skb.wire_len = uint32_t(input.size());
  bpf::TestRunInput run;
  run.packet = input;
  run.packetRoom = input.size() + 512;
  run.context = byteView(skb);
  run.keepContext = true;
  auto ran = bpf::testRun(programFd, run);
  if (!ran)
    return withContext(ran.takeError(),
                       llvm::formatv("TC, a {0}-byte packet: {1}; context {2}", input.size(),
                                     toHex(input), toHex(*context))
                           .str());
  return PacketResult{ran->verdict, std::move(ran->packet), std::move(ran->context)};
}

} // namespace

Expected<PacketResult> runPacket(int programFd, bpf::ProgramType type,
                                 const SamplePacket &step) {
  if (type == bpf::ProgramType::Tc)
    return runTc(programFd, step);
  return runXdp(programFd, step);
}

} // namespace morpheus::runtime
