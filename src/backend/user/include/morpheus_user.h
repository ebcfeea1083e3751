/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The table API of Morpheus's user-space data plane, for handler code: plain
 * C, compiled at run time to LLVM IR for the host (clang-19 -O2) and
 * JIT-compiled in process by backend/user. It plays the part bpf_helpers.h
 * plays for an XDP program: tables are globals declared with MU_TABLE (their
 * layout, as a .maps definition gives a map's), handlers are functions marked
 * MU_HANDLER, and every table access is a call to mu_lookup, mu_update or
 * mu_delete, which backend/user/UserSignatures describes to the core.
 *
 * The runtime creates one table per MU_TABLE definition and binds the
 * global's symbol to it in every JIT-compiled version of the handler, so
 * the generic and every specialized version share the same tables.
 * Writable globals of the handler are refused at load: state lives in
 * tables (an MU_ARRAY for counters), where every version sees it.
 */
#ifndef MORPHEUS_USER_H
#define MORPHEUS_USER_H

#include <stdint.h>

/* The section that marks table definitions and handlers in the IR. */
#define MU_TABLE_SECTION "morpheus_tables"
#define MU_HANDLER_SECTION "morpheus_handler"
#define MU_PREFETCH_SECTION "morpheus_prefetch"

enum mu_table_kind {
	MU_HASH = 1,       /* exact match on the whole key */
	MU_ARRAY = 2,      /* __u32 index below max_entries; every slot exists, zeroed */
	MU_LPM_LINEAR = 3, /* longest prefix, rules scanned longest first */
	MU_LPM_DIR24 = 4,  /* longest prefix, DIR-24-8 tables (IPv4 only) */
	/* DPDK's own tables, when the runtime is built with DPDK (refused at
	 * load otherwise): */
	MU_HASH_RTE = 5,   /* exact match, DPDK's rte_hash (cuckoo) */
	MU_LPM_RTE = 6,    /* longest prefix, DPDK's rte_lpm (DIR-24-8, IPv4 only) */
};

/* A table's definition. LPM keys are { uint32_t prefixlen; address bytes }
 * as for BPF_MAP_TYPE_LPM_TRIE, and every LPM kind answers as the kernel's
 * trie: a lookup returns the longest rule no longer than the key's
 * prefixlen whose bits are the address's (a packet's lookup passes the
 * whole length; prefixlen 0 asks for a default route only), and nothing
 * for a prefixlen beyond the address; in updates and deletes prefixlen is
 * the rule's, and its address bits beyond it are ignored. */
struct mu_table_def {
	uint32_t kind;
	uint32_t key_size;
	uint32_t value_size;
	uint32_t max_entries;
};

#define MU_TABLE(name, kind, key_type, value_type, max)                        \
	struct mu_table_def name __attribute__((section(MU_TABLE_SECTION))) = {   \
		(kind), sizeof(key_type), sizeof(value_type), (max)}

/* What a handler gets per packet; it may rewrite data[0..len) in place and
 * sets port for MU_TX. */
struct mu_packet {
	uint8_t *data;
	uint32_t len;
	uint32_t port; /* in: the ingress port; out: the egress port of MU_TX */
};

enum mu_verdict {
	MU_DROP = 0,
	MU_PASS = 1, /* to the slow path (the host stack) */
	MU_TX = 2,   /* out of packet->port */
};

#define MU_HANDLER __attribute__((section(MU_HANDLER_SECTION)))
/* A handler's prefetch function, `void NAME_prefetch(const struct
 * mu_packet *)` for handler NAME: it only calls mu_prefetch for the keys
 * NAME will look up (nothing else: it must not change anything). With
 * sub-batches, the runtime calls it on the next sub-batch's packets
 * before running the handler on the current one, so their table entries
 * are on their way to the cache (the P4C paper's prefetching). A handler
 * that declares none gets one derived from its own code: the handler up to
 * its first lookup with a per-packet key, prefetched instead (what it
 * derives is in core/passes/PrefetchStage.cpp). */
#define MU_PREFETCH __attribute__((section(MU_PREFETCH_SECTION)))

/* The value stored under `key`, or NULL. The pointer stays valid until the
 * entry is deleted. */
void *mu_lookup(struct mu_table_def *table, const void *key);
/* Inserts or replaces; 0, or -1 when the table is full or the key invalid. */
long mu_update(struct mu_table_def *table, const void *key, const void *value);
/* 0, or -1 when absent. */
long mu_delete(struct mu_table_def *table, const void *key);
/* Starts loading the memory a lookup of `key` will read first (the DIR-24-8
 * entry, the hash bucket); changes nothing, returns nothing. */
void mu_prefetch(struct mu_table_def *table, const void *key);

/* What a custom generator's lookup function (backend/user/Generators.h)
 * returns for a key besides an entry's index: no entry answers it, or the
 * table's own lookup must. */
#define MU_GENERATED_MISS (-1LL)
#define MU_GENERATED_ASK_TABLE (-2LL)

#endif /* MORPHEUS_USER_H */
