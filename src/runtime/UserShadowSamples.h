// Sample packets for the user-space backend's shadow validation
// (user::ShadowCopies): the packets the eBPF backend's validation
// synthesizes (runtime/PacketSamples: valid Ethernet/IPv4/IPv6 frames whose
// addresses, ports and protocols come from the keys and values the cycle
// read, cut ones, random bytes), entering port 0. A user-space table's
// keys are laid out as the eBPF map of its match kind would hold them
// (LPM keys start with their prefix length), which is what the synthesis
// reads them as.
#pragma once

#include "backend/user/Handler.h"

#include <cstdint>

namespace morpheus::runtime {

// Shadow validation on `packets` such packets per cycle (0: off).
user::HandlerOptions::Shadow packetsAimedAtTables(uint32_t packets = 64);

} // namespace morpheus::runtime
