// SPDX-License-Identifier: GPL-2.0
// learning.bpf.c over an LRU table small enough that the data plane's
// inserts evict: entries disappear without a write naming their key, so no
// fast path may answer for this table (core/passes/GuardTableWrites.cpp).
#define FLOWS_TYPE BPF_MAP_TYPE_LRU_HASH
#define FLOWS_ENTRIES 256
#include "learning.bpf.c"
