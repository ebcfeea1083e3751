// What a veth's XDP hook runs, and what an adopted hook's trampoline
// serves, seen from outside as an operator's tools see them: shared by the
// tests that adopt programs and those that restart the agent.
#pragma once

#include "KernelSupport.h"
#include "netns/VethPair.h"
#include "support/Netns.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <net/if.h>

#include <string>

namespace morpheus::testing {

// The program the veth's B side XDP hook runs (netlink's view, either
// kind of attachment; one per hook).
inline uint32_t hookProgram(const VethPair &veth) {
  uint32_t id = 0;
  llvm::consumeError(netns::runInNetns(veth.nsB(), [&]() -> Error {
    bpf_xdp_query_opts query = {};
    query.sz = sizeof(query);
    if (bpf_xdp_query(if_nametoindex(veth.ifB().c_str()), 0, &query) == 0)
      id = query.prog_id;
    return Error::success();
  }));
  return id;
}

// The program slot 0 of the trampoline's Morpheus array holds (0: empty),
// found from the trampoline's maps: the one that is not the pinned owner array.
inline uint32_t servedThrough(uint32_t trampolineId, const std::string &ownerPin) {
  Fd trampoline(bpf_prog_get_fd_by_id(trampolineId));
  Fd owner(bpf_obj_get(ownerPin.c_str()));
  if (trampoline.fd < 0 || owner.fd < 0)
    return 0;
  for (uint32_t id : mapIdsOf(trampoline.fd)) {
    if (id == mapIdOf(owner.fd))
      continue;
    Fd array(bpf_map_get_fd_by_id(id));
    uint32_t slot = 0, program = 0;
    if (bpf_map_lookup_elem(array.fd, &slot, &program) == 0)
      return program;
  }
  return 0;
}

} // namespace morpheus::testing
