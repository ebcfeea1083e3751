// DPDK's EAL (environment abstraction layer), initialised once per process
// and shared by everything here that needs DPDK: the DPDK tables
// (DpdkTables.h: rte_hash and rte_lpm allocate from its memory) and the
// ports (DpdkPorts.h, which add their virtual devices to it). DPDK cannot
// initialise its EAL again after a cleanup, so it is never cleaned up: it
// lives until the process exits. Built when libdpdk is found.
//
// No hugepages, no PCI, no shared configuration (memory in the process):
// it runs on machines without NICs or hugepages and leaves nothing behind.
#pragma once

#include "support/Error.h"

#include <cstdint>

namespace morpheus::user {

// At least this much EAL memory (MiB, reserved at initialisation and
// touched only where DPDK allocates): an rte_lpm takes 64 MiB for its
// 2^24 first-level entries.
inline constexpr uint32_t DefaultEalMegabytes = 2048;

// Initialises the EAL with max(megabytes, DefaultEalMegabytes) of memory
// the first time; afterwards an error when it has less than `megabytes`.
// The calling thread keeps its CPU affinity (EAL would pin it to one
// core: a table's user is not a DPDK lcore loop).
Error initialiseEal(uint32_t megabytes = 0);

} // namespace morpheus::user
