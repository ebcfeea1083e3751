#include "backend/bpf/Extension.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include <array>
#include <cstring>
#include <fstream>
#include <memory>

namespace morpheus::bpf {

namespace {

struct BtfDeleter {
  void operator()(btf *types) const { btf__free(types); }
};
using BtfPointer = std::unique_ptr<btf, BtfDeleter>;

// Type information for functions `names`, each `int NAME(struct xdp_md
// *ctx)`, loaded into the kernel; `ids` gets each function's type id.
Expected<BtfPointer> xdpFunctionTypes(const std::vector<std::string> &names,
                                      std::vector<uint32_t> &ids) {
  BtfPointer types(btf__new_empty());
  if (!types)
    return makeSystemError(errno, "cannot build BTF");
  btf *raw = types.get();
  int integer = btf__add_int(raw, "int", 4, BTF_INT_SIGNED);
  int word = btf__add_int(raw, "__u32", 4, 0);
  // struct xdp_md as the UAPI declares it: the kernel compares the name of
  // the struct a parameter points to with the target's.
  int context = btf__add_struct(raw, "xdp_md", 6 * 4);
  unsigned offset = 0;
  for (const char *field :
       {"data", "data_end", "data_meta", "ingress_ifindex", "rx_queue_index", "egress_ifindex"}) {
    btf__add_field(raw, field, word, offset, 0);
    offset += 32;
  }
  int pointer = btf__add_ptr(raw, context);
  int prototype = btf__add_func_proto(raw, integer);
  if (integer < 0 || word < 0 || context < 0 || pointer < 0 || prototype < 0 ||
      btf__add_func_param(raw, "ctx", pointer))
    return makeError("cannot build the BTF of an XDP function");
  for (const std::string &name : names) {
    int id = btf__add_func(raw, name.c_str(), BTF_FUNC_GLOBAL, prototype);
    if (id < 0)
      return makeError("cannot build the BTF of function '{0}'", name);
    ids.push_back(uint32_t(id));
  }
  if (btf__load_into_kernel(raw))
    return makeSystemError(errno, "the kernel refused the BTF of an XDP function");
  return types;
}

// The kernel's lockdown mode ("integrity"), where securityfs is mounted.
std::string lockdownMode() {
  std::ifstream file("/sys/kernel/security/lockdown");
  std::string line;
  if (!std::getline(file, line))
    return "";
  size_t open = line.find('['), close = line.find(']');
  return open != std::string::npos && close > open ? line.substr(open + 1, close - open - 1) : "";
}

ExtensionSupport probe() {
  std::vector<uint32_t> ids;
  auto types = xdpFunctionTypes({"morpheus_probe"}, ids);
  if (!types) {
    ErrorDetails details = takeErrorDetails(types.takeError());
    return {details.code.value() ? details.code.value() : EINVAL, details.message};
  }
  std::vector<bpf_insn> code = returnPass();
  bpf_func_info function = {0, ids[0]};
  LIBBPF_OPTS(bpf_prog_load_opts, target, .expected_attach_type = BPF_XDP,
              .prog_btf_fd = uint32_t(btf__fd(types->get())), .func_info = &function,
              .func_info_cnt = 1, .func_info_rec_size = sizeof(function));
  FileDescriptor targetFd(
      bpf_prog_load(BPF_PROG_TYPE_XDP, "morpheus_probe", "GPL", code.data(), code.size(), &target));
  if (!targetFd.valid()) {
    int error = errno;
    return {error, "an XDP program with BTF, the probe's target, was refused: " +
                       std::string(std::strerror(error))};
  }
  auto extension = loadXdpExtension(code, "morpheus_probe", targetFd.get(), "morpheus_probe");
  if (extension)
    return {};
  ErrorDetails details = takeErrorDetails(extension.takeError());
  int error = details.code.value() ? details.code.value() : EINVAL;
  std::string reason = "the kernel refuses extension (freplace) programs: loading a trivial one "
                       "failed with " +
                       std::string(std::strerror(error));
  if (error == EPERM) {
    reason += " before the verifier ran, with every capability held (a kernel in lockdown, or "
              "built without BPF trampolines for programs, refuses them so)";
    std::string mode = lockdownMode();
    if (!mode.empty())
      reason += "; the kernel's lockdown mode is '" + mode + "'";
  } else {
    reason += " (" + details.message + ")";
  }
  return {error, reason};
}

} // namespace

std::vector<bpf_insn> returnPass() {
  bpf_insn set = {};
  set.code = BPF_ALU64 | BPF_MOV | BPF_K;
  set.dst_reg = BPF_REG_0;
  set.imm = XDP_PASS;
  bpf_insn exit = {};
  exit.code = BPF_JMP | BPF_EXIT;
  return {set, exit};
}

const ExtensionSupport &probeExtensions() {
  static const ExtensionSupport support = probe();
  return support;
}

Error requireExtensions(const std::string &feature) {
  const ExtensionSupport &support = probeExtensions();
  if (support.allowed())
    return Error::success();
  return makeSystemError(support.error, "{0} needs extension programs, and {1}", feature,
                         support.reason);
}

Expected<uint32_t> functionBtfId(int programFd, const std::string &function) {
  bpf_prog_info info = {};
  uint32_t length = sizeof(info);
  if (bpf_obj_get_info_by_fd(programFd, &info, &length))
    return makeSystemError(errno, "cannot read a program's info");
  if (!info.btf_id)
    return makeError("program '{0}' (id {1}) carries no BTF: nothing can replace its functions",
                     info.name, info.id);
  BtfPointer types(btf__load_from_kernel_by_id(info.btf_id));
  if (!types)
    return makeSystemError(errno, "program '{0}': cannot read its BTF", info.name);
  int id = btf__find_by_name_kind(types.get(), function.c_str(), BTF_KIND_FUNC);
  if (id <= 0)
    return makeError("program '{0}' (id {1}) has no function '{2}'", info.name, info.id, function);
  return uint32_t(id);
}

Expected<FileDescriptor> loadXdpExtension(const std::vector<bpf_insn> &instructions,
                                          const std::string &name, int targetFd,
                                          const std::string &function) {
  auto target = functionBtfId(targetFd, function);
  if (!target)
    return target.takeError();
  std::vector<uint32_t> ids;
  auto types = xdpFunctionTypes({name}, ids);
  if (!types)
    return types.takeError();
  bpf_func_info own = {0, ids[0]};
  std::array<char, 8192> log{};
  // An extension's expected attach type must be none: it inherits its
  // target's.
  LIBBPF_OPTS(bpf_prog_load_opts, opts, .prog_btf_fd = uint32_t(btf__fd(types->get())),
              .attach_btf_id = *target, .attach_prog_fd = uint32_t(targetFd), .func_info = &own,
              .func_info_cnt = 1, .func_info_rec_size = sizeof(own), .log_level = 1,
              .log_size = uint32_t(log.size()), .log_buf = log.data());
  int fd = bpf_prog_load(BPF_PROG_TYPE_EXT, name.c_str(), "GPL", instructions.data(),
                         instructions.size(), &opts);
  if (fd < 0)
    return makeSystemError(errno, "extension '{0}' of function '{1}' refused{2}{3}", name, function,
                           log[0] ? "; verifier log:\n" : "", log.data());
  return FileDescriptor(fd);
}

Expected<FileDescriptor> attachExtension(int programFd, int targetFd, const std::string &function) {
  auto target = functionBtfId(targetFd, function);
  if (!target)
    return target.takeError();
  LIBBPF_OPTS(bpf_link_create_opts, opts, .target_btf_id = *target);
  int link = bpf_link_create(programFd, targetFd, bpf_attach_type(0), &opts);
  if (link < 0)
    return makeSystemError(errno, "cannot attach an extension in place of function '{0}'",
                           function);
  return FileDescriptor(link);
}

} // namespace morpheus::bpf
