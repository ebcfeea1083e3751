#include "backend/bpf/ProgramType.h"

#include "backend/bpf/LegacyMaps.h"

#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <llvm/IR/Module.h>

#include <cstddef>
#include <vector>

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

std::string kernelTypeOfSection(llvm::StringRef section) {
  bpf_prog_type type = BPF_PROG_TYPE_UNSPEC;
  bpf_attach_type attach = bpf_attach_type(0);
  if (section.starts_with("tcx/"))
    type = BPF_PROG_TYPE_SCHED_CLS;
  else if (libbpf_prog_type_by_name(section.str().c_str(), &type, &attach))
    return "a type libbpf cannot tell";
  const char *name = libbpf_bpf_prog_type_str(type);
  return name ? name : "type " + std::to_string(type);
}

std::map<std::string, ProgramType> namedProgramTypes() {
  return {{programTypeName(ProgramType::Xdp), ProgramType::Xdp},
          {programTypeName(ProgramType::Tc), ProgramType::Tc}};
}

const char *canonicalSection(ProgramType type) {
  return type == ProgramType::Tc ? "tc" : "xdp";
}

uint32_t dropVerdict(ProgramType type) {
  constexpr uint32_t XdpAborted = 0, TcActShot = 2;
  return type == ProgramType::Tc ? TcActShot : XdpAborted;
}

namespace {

#define MORPHEUS_FIELD(type, name, member, kind)                                                \
  ContextField {                                                                               \
    name, uint32_t(offsetof(type, member)), uint32_t(sizeof(type::member)), ContextField::Kind::kind \
  }

const ContextField XdpFields[] = {
    MORPHEUS_FIELD(xdp_md, "ingress_ifindex", ingress_ifindex, Device),
    MORPHEUS_FIELD(xdp_md, "rx_queue_index", rx_queue_index, ReceiveQueue),
};

const ContextField TcFields[] = {
    MORPHEUS_FIELD(__sk_buff, "mark", mark, Any),
    MORPHEUS_FIELD(__sk_buff, "priority", priority, Any),
    MORPHEUS_FIELD(__sk_buff, "ingress_ifindex", ingress_ifindex, Any),
    MORPHEUS_FIELD(__sk_buff, "ifindex", ifindex, Device),
    MORPHEUS_FIELD(__sk_buff, "cb[0]", cb[0], Any),
    MORPHEUS_FIELD(__sk_buff, "cb[1]", cb[1], Any),
    MORPHEUS_FIELD(__sk_buff, "cb[2]", cb[2], Any),
    MORPHEUS_FIELD(__sk_buff, "cb[3]", cb[3], Any),
    MORPHEUS_FIELD(__sk_buff, "cb[4]", cb[4], Any),
    MORPHEUS_FIELD(__sk_buff, "tstamp", tstamp, Any),
    MORPHEUS_FIELD(__sk_buff, "wire_len", wire_len, WireLength),
    MORPHEUS_FIELD(__sk_buff, "gso_segs", gso_segs, GsoSegments),
    MORPHEUS_FIELD(__sk_buff, "gso_size", gso_size, Any),
    MORPHEUS_FIELD(__sk_buff, "hwtstamp", hwtstamp, Any),
};

#undef MORPHEUS_FIELD

} // namespace

llvm::ArrayRef<ContextField> settableContextFields(ProgramType type) {
  switch (type) {
  case ProgramType::Xdp:
    return XdpFields;
  case ProgramType::Tc:
    return TcFields;
  case ProgramType::Other:
    return {};
  }
  return {};
}

uint32_t contextSize(ProgramType type) {
  switch (type) {
  case ProgramType::Xdp:
    return sizeof(xdp_md);
  case ProgramType::Tc:
    return sizeof(__sk_buff);
  case ProgramType::Other:
    return 0;
  }
  return 0;
}

Error placeProgramSections(llvm::Module &module, const std::string &path,
                           std::optional<ProgramType> forced) {
  // The type of an iproute2 tail-call section's programs: the one the
  // object's other programs have (their program array takes only those).
  std::optional<ProgramType> tailCallType = forced;
  std::string tailCallSectionName;
  bool mixed = false;
  std::vector<llvm::Function *> programs;
  for (llvm::Function &function : module) {
    if (function.isDeclaration() || !function.hasSection() ||
        function.getSection().starts_with(".text"))
      continue;
    programs.push_back(&function);
    // libbpf refuses static programs (1.x: "is static and not supported");
    // iproute2's and Cilium's loaders take them. The function is a program
    // entry either way (the section and `used` keep it), and nothing in
    // the module names it but its callers, which keep reaching it: global
    // linkage changes only what the ELF's symbol table says.
    if (function.hasLocalLinkage())
      function.setLinkage(llvm::GlobalValue::ExternalLinkage);
    if (forced || tailCallSection(function.getSection()))
      continue;
    std::optional<ProgramType> type = programTypeOfSection(function.getSection());
    if (!type)
      continue;
    if (tailCallType && *tailCallType != *type)
      mixed = true;
    if (!tailCallType) {
      tailCallType = type;
      tailCallSectionName = function.getSection().starts_with("tcx/")
                                ? canonicalSection(ProgramType::Tc)
                                : function.getSection().str();
    }
  }
  for (llvm::Function *function : programs) {
    llvm::StringRef section = function->getSection();
    if (tailCallSection(section)) {
      if (!forced && (mixed || !tailCallType || *tailCallType == ProgramType::Other))
        return makeError("{0}: program '{1}' is in iproute2's tail-call section '{2}', whose "
                         "type is the object's other programs' type, and they {3}; pass "
                         "--prog-type xdp or --prog-type tc",
                         path, function->getName(), section,
                         mixed            ? "have several"
                         : !tailCallType ? "have none libbpf can place"
                                         : "are neither XDP nor TC");
      function->setSection(forced ? canonicalSection(*forced) : tailCallSectionName);
      continue;
    }
    if (section.starts_with("tcx/")) {
      // What libbpf 1.1 cannot open yet; the kernel sees no section name.
      function->setSection(canonicalSection(ProgramType::Tc));
      continue;
    }
    if (programTypeOfSection(section))
      continue;
    if (!forced)
      return makeError("{0}: program '{1}' is in section '{2}', which libbpf cannot map to a "
                       "program type (a name from before libbpf 1.0?); pass --prog-type xdp "
                       "or --prog-type tc",
                       path, function->getName(), section);
    function->setSection(canonicalSection(*forced));
  }
  return Error::success();
}

} // namespace morpheus::bpf
