#include "backend/user/Generators.h"

#include "backend/user/Handler.h"
#include "support/Clang.h"

#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <cstring>

using namespace llvm;

namespace morpheus::user {

static_assert(MU_GENERATED_MISS == core::GeneratedMiss &&
              MU_GENERATED_ASK_TABLE == core::GeneratedAskTable);

core::LookupGenerator generatorFromSource(std::string name, std::string table,
                                          std::optional<core::TableMatch> match,
                                          std::string function, SourceGenerator source,
                                          std::vector<std::string> cflags) {
  core::LookupGenerator generator;
  generator.name = name;
  generator.table = std::move(table);
  generator.match = match;
  generator.function = function;
  generator.generate = [name, source = std::move(source), cflags = std::move(cflags)](
                           const core::TableInfo &table, const core::TableContents &contents,
                           LLVMContext &context) -> Expected<std::unique_ptr<Module>> {
    auto text = source(table, contents);
    if (!text)
      return text.takeError();
    SmallString<128> path;
    int fd;
    if (std::error_code error =
            sys::fs::createTemporaryFile("morpheus-generator-" + name, "c", fd, path))
      return makeError("generator '{0}': its source file: {1}", name, error.message());
    {
      raw_fd_ostream out(fd, /*shouldClose=*/true);
      out << *text;
    }
    std::vector<std::string> flags = {"-O2", "-g0", "-I", apiIncludeDirectory()};
    flags.insert(flags.end(), cflags.begin(), cflags.end());
    // Not cached: the source is a fresh temporary file, a new name each time.
    auto bitcode = compileToBitcode(MORPHEUS_CLANG, path.str().str(), flags);
    sys::fs::remove(path);
    if (!bitcode)
      return withContext(bitcode.takeError(), "generator '" + name + "'");
    auto module = parseBitcodeFile(bitcode->buffer->getMemBufferRef(), context);
    if (!module)
      return withContext(module.takeError(), "generator '" + name + "': clang output");
    return std::move(*module);
  };
  return generator;
}

namespace {

constexpr const char *NestedIfFunction = "morpheus_nested_if_lpm";

struct Prefix {
  uint32_t length, address; // address in host order, masked
  size_t entry;             // index in TableContents::entries
  std::vector<size_t> nested; // prefixes directly inside this one
};

uint32_t maskOf(uint32_t length) { return length ? ~uint32_t(0) << (32 - length) : 0; }

bool contains(const Prefix &outer, const Prefix &inner) {
  return outer.length < inner.length && (inner.address & maskOf(outer.length)) == outer.address;
}

} // namespace

Expected<std::string> nestedIfLpmSource(const core::TableInfo &table,
                                        const core::TableContents &contents) {
  if (table.match != core::TableMatch::LongestPrefix || table.keySize != 8)
    return makeError("table '{0}' is not an IPv4 LPM table", table.name);
  std::vector<Prefix> prefixes;
  for (size_t i = 0; i < contents.entries.size(); ++i) {
    const Bytes &key = contents.entries[i].key;
    if (key.size() != 8)
      return makeError("table '{0}': entry {1} has a {2}-byte key", table.name, i, key.size());
    uint32_t length;
    std::memcpy(&length, key.data(), 4); // host order
    if (length > 32)
      return makeError("table '{0}': entry {1} has prefix length {2}", table.name, i, length);
    uint32_t address = uint32_t(key[4]) << 24 | uint32_t(key[5]) << 16 | uint32_t(key[6]) << 8 |
                       uint32_t(key[7]);
    prefixes.push_back({length, address & maskOf(length), i, {}});
  }
  // Least specific first; each prefix under the longest earlier one
  // containing it (its parent), or at the top.
  std::sort(prefixes.begin(), prefixes.end(), [](const Prefix &a, const Prefix &b) {
    return a.length != b.length ? a.length < b.length : a.address < b.address;
  });
  for (size_t i = 1; i < prefixes.size(); ++i)
    if (prefixes[i].length == prefixes[i - 1].length &&
        prefixes[i].address == prefixes[i - 1].address)
      return makeError("table '{0}': two entries for {1:x}/{2}", table.name,
                       prefixes[i].address, prefixes[i].length);
  std::vector<size_t> top;
  for (size_t i = 0; i < prefixes.size(); ++i) {
    std::optional<size_t> parent;
    for (size_t j = i; j-- > 0;)
      if (contains(prefixes[j], prefixes[i])) {
        parent = j; // the longest: the latest containing one
        break;
      }
    (parent ? prefixes[*parent].nested : top).push_back(i);
  }

  std::string code = formatv("#include <morpheus_user.h>\n\n"
                             "long long {0}(const void *key)\n{{\n"
                             "\tconst unsigned char *k = key;\n"
                             "\tunsigned length = *(const unsigned *)key;\n"
                             "\tunsigned a = (unsigned)k[4] << 24 | (unsigned)k[5] << 16 | "
                             "(unsigned)k[6] << 8 | k[7];\n"
                             "\tlong long answer = MU_GENERATED_MISS;\n\n"
                             "\tif (length != 32)\n\t\treturn MU_GENERATED_ASK_TABLE;\n",
                             NestedIfFunction)
                         .str();
  auto emit = [&](auto &self, const std::vector<size_t> &level, unsigned depth) -> void {
    std::string indent(depth, '\t');
    for (size_t n = 0; n < level.size(); ++n) {
      const Prefix &prefix = prefixes[level[n]];
      code += formatv("{0}{1}if ((a & {2:x}u) == {3:x}u) {{\n{0}\tanswer = {4};\n", indent,
                      n ? "} else " : "", maskOf(prefix.length), prefix.address, prefix.entry)
                  .str();
      self(self, prefix.nested, depth + 1);
    }
    if (!level.empty())
      code += indent + "}\n";
  };
  emit(emit, top, 1);
  code += "\treturn answer;\n}\n";
  return code;
}

core::LookupGenerator nestedIfLpm(std::string table) {
  return generatorFromSource("nested-if-lpm", std::move(table), core::TableMatch::LongestPrefix,
                             NestedIfFunction, nestedIfLpmSource);
}

} // namespace morpheus::user
