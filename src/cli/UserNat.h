// The user-space NAT (nf/nat/user/nat_user.c) from the control plane's
// side: the NAT's own configuration file (nf/nat/NatControl.h, the kernel
// version's) with its port names made the user data plane's port numbers,
// and a configuration made the handler's in one guarded change. In the cli
// layer: it writes backend/user tables, which no nf/ code may include.
#pragma once

#include "backend/user/TableSet.h"
#include "nf/nat/NatControl.h"

namespace morpheus::nf::nat {

// The user data plane's ports for inside-port and outside-port: a number
// is the port itself; a name is the port of its rank among the names the
// file gives (the first, inside-port's, 0; another 1), so nat.conf's eth0
// and eth1 are ports 0 and 1 and a one-armed file's one name is port 0.
// Without mac=, the outside port's MAC is userPortMac(port). One resolver
// per file: it remembers the names it has given ports.
PortResolver userPorts();
Mac userPortMac(uint32_t port);

// Makes `settings` the configuration of `tables` (a nat_user.c handler's)
// in one guarded change: nat_config, the inside prefixes (those no longer
// listed removed), and the translations it no longer allows removed from
// both binding tables (allowsTranslation), as applyConfig does to the
// kernel's maps.
Error loadUserNat(user::TableSet &tables, const NatSettings &settings);

} // namespace morpheus::nf::nat
