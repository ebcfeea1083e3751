// A program of the corpus (tests/programs/) under an Optimizer, with the
// updates made through Morpheus (guarded) and runs of the original and of
// whatever version is active, for the kernel tests of each corner case.
#pragma once

#include "KernelSupport.h"
#include "backend/bpf/MapUpdater.h"
#include "runtime/Optimizer.h"

#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>

#include <algorithm>
#include <cstring>

namespace morpheus::testing {

inline std::string corpusPath(const std::string &file) {
  return sourcePath("tests/programs/" + file);
}

class CorpusProgram {
public:
  // Shadow validation is off by default: these tests check what the compiler
  // builds, which a sample of packets must not get the chance to hide.
  explicit CorpusProgram(const std::string &file, runtime::OptimizerOptions options = noShadow()) {
    auto created = runtime::Optimizer::create(corpusPath(file), std::move(options));
    if (!created) {
      ADD_FAILURE() << llvm::toString(created.takeError());
      return;
    }
    optimizer = std::move(*created);
  }

  static runtime::OptimizerOptions noShadow() {
    runtime::OptimizerOptions options;
    options.shadowPackets = 0;
    return options;
  }

  bool ok() const { return optimizer != nullptr; }
  runtime::Optimizer &opt() { return *optimizer; }

  // A change through Morpheus: the guard is bumped before it is applied.
  template <typename K, typename V> void set(const std::string &map, const K &key, const V &value) {
    auto updater = bpf::MapUpdater::forMap(optimizer->mapFd(map), map, &optimizer->guard());
    ASSERT_THAT_EXPECTED(updater, llvm::Succeeded());
    llvm::Error err = updater->update(bytesOf(key), bytesOf(value));
    ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded()) << map;
  }

  // Runs a cycle; returns whether a new version was installed.
  core::CycleReport cycle() { return optimizer->runCycle(); }

  RunResult original(const Bytes &packet) { return runOnce(optimizer->originalFd(), packet); }
  RunResult active(const Bytes &packet) { return runOnce(optimizer->activeFd(), packet); }

  // The decision the last specialization took at sites of `table` (the
  // first one found, applied or not), or nullptr.
  static const core::SiteDecision *decision(const core::CycleReport &report,
                                            const std::string &table, bool applied) {
    for (const core::SiteDecision &d : report.log.decisions)
      if (d.table == table && d.applied == applied)
        return &d;
    return nullptr;
  }

private:
  std::unique_ptr<runtime::Optimizer> optimizer;
};

} // namespace morpheus::testing
