"""Flow-index file: one fixed 32-byte record per packet, for a driver that rewrites a
template frame.

Header (32 bytes): magic b"MTRIDX1\\0", u32 version (1), u32 record size (32),
u64 record count, u32 frame size, u32 flags (0) -- little-endian.
Record (32 bytes), fields in network byte order as they appear in the frame:
  0 src IPv4 (4)  4 dst IPv4 (4)  8 sport (2)  10 dport (2)  12 protocol (1)
 13 flags (1: bit 0 = 802.1Q tag present)  14 VLAN TCI (2)  16 dst MAC (6)
 22 src MAC (6)  28 flow id (4, index into the flow set)
ICMP records carry the echo identifier in sport and the sequence in dport.
With format 'jsonl' every line is instead a JSON object with the same fields.
"""
from __future__ import annotations

import json
import struct

from .flows import Flow

MAGIC = b"MTRIDX1\0"
HEADER = struct.Struct("<8sIIQII")
RECORD = struct.Struct("!IIHHBBH6s6sI")
assert HEADER.size == 32 and RECORD.size == 32


def _rec(flow: Flow, fid: int) -> bytes:
    return RECORD.pack(flow.src_ip, flow.dst_ip, flow.sport, flow.dport, flow.proto,
                       1 if flow.vlan else 0, flow.vlan, flow.dst_mac, flow.src_mac, fid)


def write_index(path, flows, sequence, frame_size=0, fmt="bin"):
    if fmt == "jsonl":
        with open(path, "w") as f:
            for fid in sequence:
                fl = flows[fid]
                f.write(json.dumps({"src": _ip(fl.src_ip), "dst": _ip(fl.dst_ip),
                                    "sport": fl.sport, "dport": fl.dport, "proto": fl.proto,
                                    "vlan": fl.vlan, "dst_mac": fl.dst_mac.hex(":"),
                                    "src_mac": fl.src_mac.hex(":"), "flow": fid}) + "\n")
        return
    recs = {}
    with open(path, "wb") as f:
        f.write(HEADER.pack(MAGIC, 1, RECORD.size, len(sequence), frame_size, 0))
        for fid in sequence:
            r = recs.get(fid)
            if r is None:
                r = recs[fid] = _rec(flows[fid], fid)
            f.write(r)


def read_index(path):
    """-> (frame_size, [(Flow, flow id)]) of a binary index file."""
    with open(path, "rb") as f:
        data = f.read()
    magic, version, rsize, count, frame_size, _ = HEADER.unpack_from(data, 0)
    if magic != MAGIC or version != 1 or rsize != RECORD.size:
        raise ValueError(f"{path}: not a version 1 flow-index file")
    if len(data) != HEADER.size + count * rsize:
        raise ValueError(f"{path}: {count} records announced, size does not match")
    out = []
    for i in range(count):
        s, d, sp, dp, pr, fl, tci, dm, sm, fid = RECORD.unpack_from(data, HEADER.size + i * rsize)
        out.append((Flow(s, d, sp, dp, pr, sm, dm, tci & 0x0FFF if fl & 1 else 0), fid))
    return frame_size, out


def _ip(a):
    return ".".join(str((a >> s) & 0xFF) for s in (24, 16, 8, 0))
