// DPDK's own tables behind the user-space table API (Table.h), for the
// kinds MU_HASH_RTE (rte_hash) and MU_LPM_RTE (rte_lpm). Handler code calls
// mu_lookup/mu_update as for every kind, so the core's passes see them
// through UserSignatures like the others; values live in a ValuePool (an
// entry's value never moves), the DPDK structure maps a key to its slot.
// Snapshots read exactly what answers lookups: rte_hash's own keys
// (rte_hash_iterate), and for rte_lpm the rules as given (rte_lpm keeps
// its own rules but has no public iteration), which rte_lpm answers by
// the longest match. Built when libdpdk is found; the EAL is initialised
// on the first table (Eal.h).
#pragma once

#include "backend/user/Table.h"

namespace morpheus::user {

// A table of DPDK kind `kind` (MU_HASH_RTE or MU_LPM_RTE) as `info`
// (tableInfoFor) describes it; an error names the table and DPDK's reason.
Expected<std::unique_ptr<Table>> makeDpdkTable(core::TableInfo info, mu_table_kind kind);

} // namespace morpheus::user
