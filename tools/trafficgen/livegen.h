/* Map layouts shared by livegen.bpf.c and LiveFrames.cpp. */
#pragma once

#include <linux/types.h>

/* A power of two keeps the flows map at 1 MiB; plenty for a generator. */
#define LIVEGEN_MAX_FLOWS 65536

/* One entry of the `flows` ARRAY; every field in network byte order. */
struct livegen_flow {
	__be32 saddr;
	__be32 daddr;
	__be16 sport;
	__be16 dport;
	__u8 proto; /* IPPROTO_UDP or IPPROTO_TCP */
	__u8 pad[3];
};

/* The single entry of the `config` ARRAY. */
struct livegen_config {
	__u8 dst_mac[6];
	__u8 src_mac[6];
	__u32 nflows; /* entries 0..nflows-1 of `flows` are used */
};
