#include "runtime/CostCalibration.h"

#include "support/CacheDirectory.h"
#include "support/Files.h"

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>

#include <sys/utsname.h>

namespace morpheus::runtime {

std::string machineDescription() {
  utsname names = {};
  uname(&names);
  return std::string(names.nodename) + ", kernel " + names.release + " (" + names.machine + ")";
}

std::string calibrationPath() {
  std::string dir = cacheDirectory();
  utsname names = {};
  uname(&names);
  std::string key = std::string(names.nodename) + "-" + names.release + "-" + names.machine;
  for (char &c : key)
    if (c == '/' || c == ' ')
      c = '_';
  // The format in the name: a calibration of an older format is not read
  // (it is an error to read), it is measured again.
  return dir + "/cost-model-v" + std::to_string(core::CostModel::Format) + "-" + key + ".json";
}

Expected<std::optional<core::CostModel>> readCalibration(const std::string &path) {
  if (!llvm::sys::fs::exists(path))
    return std::nullopt;
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return makeSystemError(buffer.getError().value(), "{0}: cannot read the calibration", path);
  auto model = core::CostModel::fromJson((*buffer)->getBuffer(), path);
  if (!model)
    return model.takeError();
  return std::optional<core::CostModel>(std::move(*model));
}

Error writeCalibration(const std::string &path, const core::CostModel &model) {
  if (std::error_code ec =
          llvm::sys::fs::create_directories(llvm::sys::path::parent_path(path)))
    return makeSystemError(ec.value(), "{0}: cannot create its directory", path);
  return writeFile(path, model.toJson());
}

Expected<core::CostModel> costModelFor(const std::string &path, std::string &said) {
  auto cached = readCalibration(path);
  if (!cached)
    return cached.takeError();
  if (!*cached) {
    said = "cost model: default costs (no calibration at " + path +
           "; `morpheus bench calibrate` measures this machine)";
    return core::CostModel();
  }
  said = "cost model: " + (*cached)->source() + " (" + path + ")";
  return std::move(**cached);
}

} // namespace morpheus::runtime
