// `morpheus analyze` and `morpheus specialize`: the pipeline without a
// kernel, for inspection, for tests and for operators deciding what to trust.
#include "backend/bpf/MapIO.h"
#include "backend/bpf/ProgramSpec.h"
#include "cli/Commands.h"
#include "cli/Reports.h"

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>

namespace morpheus::cli {

namespace {

// Writes through a temporary file and a rename, so a failure never leaves a
// truncated object where the old one was.
Error writeFile(const std::string &path, const char *data, size_t size) {
  std::string temporary = path + ".tmp";
  std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
  out.write(data, size);
  out.close();
  if (!out || std::rename(temporary.c_str(), path.c_str())) {
    int err = errno;
    std::remove(temporary.c_str());
    return makeSystemError(err, "{0}: cannot write", path);
  }
  return Error::success();
}

} // namespace

int analyzeCommand(int argc, char **argv) {
  std::vector<OptionSpec> specs = {{"--json", "", "print JSON instead of text"}};
  for (const OptionSpec &spec : compilerOptions())
    specs.push_back(spec);
  auto args = Args::parse("analyze", argc, argv, 2, specs);
  if (!args)
    return usageError(llvm::toString(args.takeError()));
  if (args->help() || args->positional().size() != 1)
    return printUsage(*args, "morpheus analyze PROG [options]",
                      "Lists every map (type, sizes, and whether the program itself\n"
                      "writes it: ro/rw, with the reasons) and every map access site\n"
                      "(map, kind, where the key comes from). Loads nothing.\n",
                      specs);
  auto spec = bpf::ProgramSpec::load(args->positional()[0], frontendOptions(*args));
  if (!spec)
    return fail(spec.takeError());
  if (args->has("--json"))
    std::printf("%s\n", analysisToJson(**spec).dump(2).c_str());
  else
    std::fputs(analysisToText(**spec).c_str(), stdout);
  return 0;
}

int specializeCommand(int argc, char **argv) {
  std::vector<OptionSpec> specs = {
      {"--snapshot", "FILE", "map contents to specialize for (JSON, see docs/cli.md)"},
      {"-o", "FILE", "where to write the specialized BPF object"},
      {"--report", "FILE", "also write the per-site decisions as JSON"},
      {"--inline-limit", "N", "inline tables with at most N entries (default 64)"},
      {"--guard-version", "N",
       "compile in the program guard for version N (default: no guard)"}};
  for (const OptionSpec &spec : compilerOptions())
    specs.push_back(spec);
  auto args = Args::parse("specialize", argc, argv, 2, specs);
  if (!args)
    return usageError(llvm::toString(args.takeError()));
  if (args->help() || args->positional().size() != 1 || !args->has("--snapshot") ||
      !args->has("-o"))
    return printUsage(
        *args, "morpheus specialize PROG --snapshot STATE.json -o OUT.o [options]",
        "Runs the specialization pipeline once against the map contents in\n"
        "STATE.json and writes the resulting BPF object. Maps listed in the\n"
        "snapshot are taken as complete; maps not listed are not specialized.\n"
        "Without --guard-version the object has no guard: it is correct only\n"
        "while the maps hold exactly the snapshot.\n",
        specs);
  bpf::SpecializeRequest request;
  uint64_t guardVersion = 0;
  if (Error err = llvm::joinErrors(args->readUnsigned("--inline-limit", request.inlineLimit),
                                   args->readUnsigned("--guard-version", guardVersion)))
    return usageError(llvm::toString(std::move(err)));
  if (args->has("--guard-version"))
    request.guardVersion = guardVersion;
  auto spec = bpf::ProgramSpec::load(args->positional()[0], frontendOptions(*args));
  if (!spec)
    return fail(spec.takeError());

  std::string snapshotPath = *args->get("--snapshot");
  // Read whole: a legitimate snapshot of even a million-entry map stays far
  // below the limit, so a larger file is a wrong file, not a snapshot.
  constexpr uint64_t MaxSnapshotBytes = uint64_t(1) << 30;
  llvm::sys::fs::file_status status;
  if (std::error_code ec = llvm::sys::fs::status(snapshotPath, status))
    return fail(makeSystemError(ec.value(), "{0}: cannot open", snapshotPath));
  if (status.type() != llvm::sys::fs::file_type::regular_file)
    return fail(makeError("{0}: not a regular file", snapshotPath));
  if (status.getSize() > MaxSnapshotBytes)
    return fail(makeError("{0}: {1} bytes; a snapshot larger than {2} bytes is refused",
                          snapshotPath, status.getSize(), MaxSnapshotBytes));
  auto buffer = llvm::MemoryBuffer::getFile(snapshotPath);
  if (!buffer)
    return fail(makeSystemError(buffer.getError().value(), "{0}: cannot read", snapshotPath));
  llvm::StringRef text = (*buffer)->getBuffer();
  nlohmann::json document =
      nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded())
    return fail(makeError("{0}: not valid JSON", snapshotPath));
  auto snapshot = bpf::parseSnapshot(document, (*spec)->catalog(), snapshotPath);
  if (!snapshot)
    return fail(snapshot.takeError());

  auto object = (*spec)->specialize(*snapshot, request);
  if (!object)
    return fail(object.takeError());
  std::string output = *args->get("-o");
  if (Error err = writeFile(output, object->elf.data(), object->elf.size()))
    return fail(std::move(err));
  if (auto reportPath = args->get("--report")) {
    std::string report = logToJson(object->log).dump(2) + "\n";
    if (Error err = writeFile(*reportPath, report.data(), report.size()))
      return fail(std::move(err));
  }
  std::printf("%s: wrote %s (%zu bytes)\n%s", (*spec)->path().c_str(), output.c_str(),
              object->elf.size(), object->log.toText().c_str());
  return 0;
}

} // namespace morpheus::cli
