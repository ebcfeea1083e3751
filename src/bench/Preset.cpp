#include "Preset.h"

#include "backend/bpf/BpfObject.h"
#include "backend/bpf/MapAccess.h"
#include "backend/bpf/MapIO.h"
#include "backend/bpf/MapUpdater.h"
#include "nf/common/Registry.h"
#include "support/Log.h"
#include "support/Netns.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/Path.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <unistd.h>

namespace morpheus::bench {

namespace {

// A config word naming a file beside the preset becomes an absolute path,
// so setup and trace lines read like the commands an operator would type
// from the function's folder.
std::string resolveWord(const std::string &dir, const std::string &word) {
  if (word.empty() || word[0] == '-')
    return word;
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, word);
  return llvm::sys::fs::exists(path) ? std::string(path) : word;
}


// `update MAP key HEX... value HEX...` or `global NAME HEX...` (the words
// after the keyword).
Expected<PresetWrite> parseWrite(const nf::ConfigLine &line, bool global,
                                 const std::vector<std::string> &rest) {
  PresetWrite write;
  write.line = line;
  write.kind = global ? PresetWrite::Kind::Global : PresetWrite::Kind::Map;
  auto valueAt = std::find(rest.begin(), rest.end(), "value");
  bool wellFormed = global ? rest.size() >= 2
                           : rest.size() >= 5 && rest[1] == "key" &&
                                 valueAt > rest.begin() + 2 && valueAt + 1 < rest.end();
  if (!wellFormed)
    return line.error(global ? "expected 'global NAME HEX...'"
                             : "expected 'update MAP key HEX... value HEX...'");
  write.target = rest[0];
  auto hex = [&](auto from, auto to, const char *what) -> Expected<Bytes> {
    std::vector<std::string> words(from, to);
    auto bytes = bpf::parseHexBytes(llvm::join(words, " "), write.target + " " + what);
    if (!bytes)
      return line.error("{0}", llvm::toString(bytes.takeError()));
    return bytes;
  };
  if (global) {
    auto value = hex(rest.begin() + 1, rest.end(), "value");
    if (!value)
      return value.takeError();
    write.value = std::move(*value);
    return write;
  }
  auto key = hex(rest.begin() + 2, valueAt, "key");
  if (!key)
    return key.takeError();
  auto value = hex(valueAt + 1, rest.end(), "value");
  if (!value)
    return value.takeError();
  write.key = std::move(*key);
  write.value = std::move(*value);
  return write;
}

} // namespace

Expected<Preset> readPreset(const std::string &nameOrFile) {
  std::string file = nameOrFile;
  if (nameOrFile.find('/') == std::string::npos && !llvm::sys::fs::exists(nameOrFile)) {
    // "router" -> nf/router/bench.conf, "router-20routes" -> nf/router/bench-20routes.conf,
    // else "composite_l4lb" -> tests/programs/bench/composite_l4lb.conf
    auto [function, variant] = llvm::StringRef(nameOrFile).split('-');
    file = std::string(MORPHEUS_SOURCE_DIR) + "/nf/" + function.str() + "/bench" +
           (variant.empty() ? "" : "-" + variant.str()) + ".conf";
    std::string corpus = std::string(MORPHEUS_SOURCE_DIR) + "/tests/programs/bench/" + nameOrFile + ".conf";
    if (!llvm::sys::fs::exists(file) && llvm::sys::fs::exists(corpus))
      file = corpus;
  }
  if (!llvm::sys::fs::exists(file))
    return makeError("no benchmark preset '{0}' (looked for {1}); a preset is a network "
                     "function of nf/, a program of tests/programs/bench/ or the path of a "
                     "preset file",
                     nameOrFile, file);
  auto lines = nf::readConfig(file);
  if (!lines)
    return lines.takeError();
  Preset preset;
  preset.file = file;
  std::string dir(llvm::sys::path::parent_path(file));
  // A preset in nf/FUNCTION/ sets its function up through `morpheus nf`.
  if (llvm::sys::path::filename(llvm::sys::path::parent_path(dir)) == "nf")
    preset.function = std::string(llvm::sys::path::filename(dir));
  llvm::StringRef variant = llvm::sys::path::stem(file);
  if (preset.function.empty())
    preset.name = variant.str();
  else {
    preset.name = preset.function;
    if (variant.consume_front("bench-"))
      preset.name += "-" + variant.str();
  }
  for (nf::ConfigLine &line : *lines) {
    const std::string &key = line.words[0];
    std::vector<std::string> rest;
    for (size_t i = 1; i < line.words.size(); ++i)
      rest.push_back(resolveWord(dir, line.words[i]));
    if (key == "program" && rest.size() == 1)
      preset.program = rest[0];
    else if (key == "entry" && rest.size() == 1)
      preset.entry = rest[0];
    else if (key == "cflags" && !rest.empty()) {
      for (std::string word : rest) {
        // -IDIR relative to the preset, as every other path in it.
        if (llvm::StringRef(word).starts_with("-I") && word.size() > 2 &&
            !llvm::sys::path::is_absolute(word.substr(2)))
          word = "-I" + resolveWord(dir, word.substr(2));
        preset.cflags.push_back(std::move(word));
      }
    }
    else if (key == "interfaces" && !rest.empty())
      preset.interfaces = rest;
    else if (key == "ingress" && rest.size() == 1)
      preset.ingress = rest[0];
    else if (key == "setup" && !rest.empty()) {
      if (preset.function.empty())
        return line.error("'setup' runs `morpheus nf FUNCTION ...`: only a preset in "
                          "nf/FUNCTION/ has one (configure other programs with 'update' and "
                          "'global' lines)");
      line.words = rest;
      preset.setup.push_back(line);
    } else if (key == "update" || key == "global") {
      auto write = parseWrite(line, key == "global", rest);
      if (!write)
        return write.takeError();
      preset.writes.push_back(std::move(*write));
    } else if (key == "trace")
      preset.traceArgs = rest;
    else if (key == "oracle" && rest.size() == 1)
      preset.oracle = rest[0];
    else
      return line.error("expected 'program FILE', 'entry PROGRAM', 'cflags FLAG...', "
                        "'interfaces IFACE...', 'ingress IFACE', "
                        "'setup COMMAND...', 'update MAP key HEX... value HEX...', 'global "
                        "NAME HEX...', 'trace GEN_TRACE_ARGS...' or 'oracle KIND'");
  }
  if (preset.program.empty())
    return makeError("{0}: no 'program' line", file);
  if (!preset.ingress.empty() &&
      std::find(preset.interfaces.begin(), preset.interfaces.end(), preset.ingress) ==
          preset.interfaces.end())
    return makeError("{0}: ingress '{1}' is not one of the interfaces", file, preset.ingress);
  if (preset.function.empty() &&
      std::find(preset.traceArgs.begin(), preset.traceArgs.end(), "--nf") ==
          preset.traceArgs.end())
    return makeError("{0}: a preset outside nf/ names its flows' source in its 'trace' line "
                     "(e.g. 'trace --nf firewall --config FLOWS')",
                     file);
  return preset;
}

namespace {

// A preset's write of a global: its bytes in its section's one-slot map.
Error writeGlobal(const runtime::Optimizer &optimizer, const PresetWrite &write) {
  for (const core::GlobalSlice &slice : optimizer.spec().globals()) {
    if (slice.global != write.target)
      continue;
    if (slice.size != write.value.size())
      return write.line.error("global '{0}' takes {1} bytes, not {2}", write.target, slice.size,
                              write.value.size());
    int fd = optimizer.mapFd(slice.sectionTable);
    if (fd < 0)
      return write.line.error("global '{0}': no map for its section {1}", write.target,
                              slice.sectionTable);
    std::string where = write.line.file + ":" + std::to_string(write.line.number);
    auto layout = bpf::layoutOf(fd, slice.sectionTable);
    if (!layout)
      return withContext(layout.takeError(), where);
    bpf::MapAccess map(fd, slice.sectionTable);
    Bytes section(layout->valueSize);
    uint32_t zero = 0;
    auto read = map.lookup(byteView(zero), section);
    if (!read || !*read)
      return withContext(read ? makeError("map '{0}': no slot 0", slice.sectionTable)
                              : read.takeError(),
                         where + ": reading section " + slice.sectionTable);
    std::copy(write.value.begin(), write.value.end(), section.begin() + slice.offset);
    return withContext(map.update(byteView(zero), section),
                       where + ": writing global '" + write.target + "'");
  }
  return write.line.error("the program has no global '{0}' in .data or .bss", write.target);
}

// The preset's control plane: its `morpheus nf` setup commands (on the
// maps `optimizer` pinned in `pinDir`), then its writes, all in one guard
// bracket, as a control plane's transaction (client::Transaction) writes:
// each bracket waits for the programs running (an update of an array of
// maps, a grace period of milliseconds): one write at a time, Katran's
// 196,611 ring slots had not gone in after ten minutes.
Error runSetup(const Preset &preset, runtime::Optimizer &optimizer, const std::string &pinDir) {
  for (const nf::ConfigLine &line : preset.setup) {
    std::vector<std::string> words = {preset.function};
    words.insert(words.end(), line.words.begin(), line.words.end());
    words.insert(words.end(), {"--pin-dir", pinDir});
    std::fflush(stdout);
    int status = nf::runNfCommand(words);
    std::fflush(stdout); // its report before the bench's next line
    if (status != 0)
      return line.error("`morpheus nf {0} {1}` failed (exit status {2}; its message is above)",
                        preset.function, llvm::join(line.words, " "), status);
  }
  if (preset.writes.empty())
    return Error::success();
  auto bracket = bpf::GuardWord::Update::begin(&optimizer.guard());
  if (!bracket)
    return withContext(bracket.takeError(), preset.file);
  for (const PresetWrite &write : preset.writes) {
    if (write.kind == PresetWrite::Kind::Global) {
      if (Error err = writeGlobal(optimizer, write))
        return err;
      continue;
    }
    int fd = optimizer.mapFd(write.target);
    if (fd < 0)
      return write.line.error("the program has no map '{0}'", write.target);
    auto map = bpf::MapUpdater::forMap(fd, write.target, &optimizer.guard());
    if (!map)
      return write.line.error("{0}", llvm::toString(map.takeError()));
    if (Error err = map->writeUnguarded(write.key, write.value))
      return write.line.error("{0}", llvm::toString(std::move(err)));
  }
  return Error::success();
}

} // namespace

bpf::FrontendOptions frontendFor(const Preset &preset, bpf::FrontendOptions base) {
  base.cflags.insert(base.cflags.end(), preset.cflags.begin(), preset.cflags.end());
  return base;
}

namespace {

// Where bench pins each optimizer's maps: the pin root's entry
// `morpheus-bench-<pid>-<preset>-<variant>`.
constexpr std::string_view BenchPinRoot = "/sys/fs/bpf";
constexpr std::string_view BenchPinPrefix = "morpheus-bench-";

// The pin directories of bench runs that were killed: a run removes its
// own as it ends, but SIGINT, SIGTERM and kill -9 end it without that,
// and the kernel keeps every map pinned there (Katran's 134 MB ring
// among them) for as long as the pins stay. Without bpffs mounted there
// are none to find.
void sweepPinsOfKilledRuns() {
  std::error_code ec;
  for (std::filesystem::directory_iterator it(BenchPinRoot, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (!netns::leftByGoneProcess(it->path().filename().string(), BenchPinPrefix))
      continue;
    std::error_code removed;
    std::filesystem::remove_all(it->path(), removed);
    if (removed)
      processLog().warning(llvm::formatv("the pins of a killed bench run, {0}: cannot remove "
                                         "them: {1}",
                                         it->path().string(), removed.message())
                               .str());
  }
}

} // namespace

Expected<std::unique_ptr<runtime::Optimizer>> loadConfigured(const Preset &preset,
                                                             runtime::OptimizerOptions options,
                                                             const std::string &variant) {
  options.program = preset.entry;
  options.frontend = frontendFor(preset, std::move(options.frontend));
  options.pinDir = llvm::formatv("{0}/{1}{2}-{3}-{4}", BenchPinRoot, BenchPinPrefix, getpid(),
                                 preset.name, variant)
                       .str();
  if (Error err = bpf::ensureBpffs(options.pinDir))
    return err;
  auto created = runtime::Optimizer::create(preset.program, options);
  if (!created)
    return created.takeError();
  if (Error err = runSetup(preset, **created, options.pinDir))
    return err;
  return created;
}

Error inPresetNamespace(const Preset &preset,
                        const std::function<Error(const std::string &sender)> &work) {
  // What killed runs left: their namespaces and their pins.
  netns::sweepStale("bench");
  sweepPinsOfKilledRuns();
  auto scratch = netns::ScratchNamespace::create("bench");
  if (!scratch)
    return withContext(scratch.takeError(), preset.name);
  std::string sender;
  for (const std::string &iface : preset.interfaces) {
    auto peer = (*scratch)->addInterface(iface);
    if (!peer)
      return withContext(peer.takeError(), preset.name);
    if (iface == preset.ingress)
      sender = *peer;
  }
  return netns::runInNetns((*scratch)->name(), [&] { return work(sender); });
}

Expected<runtime::MapContents> configuredContents(const Preset &preset, uint32_t limit) {
  runtime::MapContents contents;
  Error err = inPresetNamespace(preset, [&](const std::string &) -> Error {
    runtime::OptimizerOptions options;
    options.shadowPackets = 0; // nothing is specialized here
    auto created = loadConfigured(preset, options, "contents");
    if (!created)
      return created.takeError();
    for (const auto &[name, info] : (*created)->spec().catalog()) {
      int fd = (*created)->mapFd(name);
      if (fd < 0)
        continue;
      auto map = bpf::layoutOf(fd, name);
      if (!map) {
        llvm::consumeError(map.takeError());
        continue;
      }
      if (!bpf::isPlainDataMap(map->type))
        continue;
      size_t valueBytes = bpf::syscallValueSize(map->type, map->valueSize);
      auto &entries = contents[name];
      Error err = bpf::forEachEntry(
          fd, map->keySize, valueBytes, name,
          [&](const core::Bytes &key, const core::Bytes &value) {
            // Arrays list every index; only the ones the config wrote matter.
            if (std::any_of(value.begin(), value.end(), [](uint8_t b) { return b != 0; }))
              entries.emplace_back(key,
                                   core::Bytes(value.begin(), value.begin() + map->valueSize));
            return entries.size() < limit;
          });
      if (err)
        return err;
    }
    return Error::success();
  });
  if (err)
    return withContext(std::move(err), "configuring " + preset.file);
  return contents;
}

} // namespace morpheus::bench
