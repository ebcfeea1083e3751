// The user-space NAT (nf/nat/user/nat_user.c) from the control plane's
// side: the NAT's own configuration file (nf/nat/NatControl.h, the kernel
// version's) with its port names made the user data plane's port numbers,
// and a configuration made the handler's in one change, written through
// support/TableWrites.h, which the user-space backend's tables implement.
#pragma once

#include "nf/nat/NatControl.h"
#include "support/TableWrites.h"

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
// in one change: nat_config, the inside prefixes (those no longer
// listed removed), and the translations it no longer allows removed from
// both binding tables (allowsTranslation), as applyConfig does to the
// kernel's maps.
Error loadUserNat(TableWrites &tables, const NatSettings &settings);

} // namespace morpheus::nf::nat
