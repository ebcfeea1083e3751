#include "backend/bpf/ProgramType.h"

#include <bpf/libbpf.h>
#include <llvm/IR/Module.h>

namespace morpheus::bpf {

const char *programTypeName(ProgramType type) {
  switch (type) {
  case ProgramType::Xdp:
    return "xdp";
  case ProgramType::Tc:
    return "tc";
  case ProgramType::Other:
    return "other";
  }
  return "other";
}

std::optional<ProgramType> programTypeOfSection(llvm::StringRef section) {
  // libbpf 1.1 does not know the tcx sections (1.3 does): they are TC.
  if (section.starts_with("tcx/"))
    return ProgramType::Tc;
  bpf_prog_type type = BPF_PROG_TYPE_UNSPEC;
  bpf_attach_type attach = bpf_attach_type(0);
  if (libbpf_prog_type_by_name(section.str().c_str(), &type, &attach))
    return std::nullopt;
  if (type == BPF_PROG_TYPE_XDP)
    return ProgramType::Xdp;
  if (type == BPF_PROG_TYPE_SCHED_CLS)
    return ProgramType::Tc;
  return ProgramType::Other;
}

const char *canonicalSection(ProgramType type) {
  return type == ProgramType::Tc ? "tc" : "xdp";
}

uint32_t dropVerdict(ProgramType type) {
  constexpr uint32_t XdpAborted = 0, TcActShot = 2;
  return type == ProgramType::Tc ? TcActShot : XdpAborted;
}

Error placeProgramSections(llvm::Module &module, const std::string &path,
                           std::optional<ProgramType> forced) {
  for (llvm::Function &function : module) {
    if (function.isDeclaration() || !function.hasSection() ||
        function.getSection().starts_with(".text"))
      continue;
    llvm::StringRef section = function.getSection();
    if (section.starts_with("tcx/")) {
      // What libbpf 1.1 cannot open yet; the kernel sees no section name.
      function.setSection(canonicalSection(ProgramType::Tc));
      continue;
    }
    if (programTypeOfSection(section))
      continue;
    if (!forced)
      return makeError("{0}: program '{1}' is in section '{2}', which libbpf cannot map to a "
                       "program type (a name from before libbpf 1.0?); pass --prog-type xdp "
                       "or --prog-type tc",
                       path, function.getName(), section);
    function.setSection(canonicalSection(*forced));
  }
  return Error::success();
}

} // namespace morpheus::bpf
