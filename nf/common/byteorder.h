/* SPDX-License-Identifier: GPL-2.0 */
/*
 * 16-bit byte-order conversions for the network functions' packet code
 * that both clang targets compile (a function's XDP program and its
 * user-space handler): libbpf's for BPF, libc's for the host, under one
 * name.
 */
#ifndef NF_COMMON_BYTEORDER_H
#define NF_COMMON_BYTEORDER_H

#ifdef __bpf__
#include <bpf/bpf_endian.h>
#define nf_htons(x) bpf_htons(x)
#define nf_ntohs(x) bpf_ntohs(x)
#else
#include <arpa/inet.h>
#define nf_htons(x) htons(x)
#define nf_ntohs(x) ntohs(x)
#endif

#endif /* NF_COMMON_BYTEORDER_H */
