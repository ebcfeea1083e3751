"""Ethernet/802.1Q/IPv4/UDP|TCP|ICMP|GRE frames and classic libpcap files."""
from __future__ import annotations

import struct

from .flows import Flow, PROTO_ICMP, PROTO_TCP, PROTO_UDP, PROTO_GRE

PCAP_MAGIC_US = 0xA1B2C3D4
PCAP_MAGIC_NS = 0xA1B23C4D
LINKTYPE_ETHERNET = 1
ETH_P_IP, ETH_P_8021Q = 0x0800, 0x8100
L4_LEN = {PROTO_UDP: 8, PROTO_TCP: 20, PROTO_ICMP: 8, PROTO_GRE: 4}


def checksum(data: bytes) -> int:
    """RFC 1071 Internet checksum (already complemented)."""
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def _pseudo(src, dst, proto, length):
    return struct.pack("!IIBBH", src, dst, 0, proto, length)


def build_frame(flow: Flow, size: int = 64, ident: int = 0) -> bytes:
    """A frame of `size` bytes (without FCS; raised to the minimum the headers need)."""
    eth = flow.dst_mac + flow.src_mac
    if flow.vlan:
        eth += struct.pack("!HH", ETH_P_8021Q, flow.vlan & 0x0FFF)
    eth += struct.pack("!H", ETH_P_IP)
    l4len = L4_LEN.get(flow.proto, 0)
    payload_len = max(0, size - len(eth) - 20 - l4len)
    payload = bytes((i * 7 + 1) & 0xFF for i in range(payload_len))
    ip_len = 20 + l4len + payload_len
    p = flow.proto
    if p == PROTO_UDP:
        l4 = struct.pack("!HHHH", flow.sport, flow.dport, 8 + payload_len, 0) + payload
        c = checksum(_pseudo(flow.src_ip, flow.dst_ip, p, len(l4)) + l4) or 0xFFFF
        l4 = l4[:6] + struct.pack("!H", c) + l4[8:]
    elif p == PROTO_TCP:
        # seq, ack, data offset 5, flags ACK|PSH, window 65535
        l4 = struct.pack("!HHIIBBHHH", flow.sport, flow.dport, 1, 1, 5 << 4, 0x18,
                         65535, 0, 0) + payload
        c = checksum(_pseudo(flow.src_ip, flow.dst_ip, p, len(l4)) + l4)
        l4 = l4[:16] + struct.pack("!H", c) + l4[18:]
    elif p == PROTO_ICMP:       # echo request, identifier = sport, sequence = dport
        l4 = struct.pack("!BBHHH", 8, 0, 0, flow.sport, flow.dport) + payload
        l4 = l4[:2] + struct.pack("!H", checksum(l4)) + l4[4:]
    elif p == PROTO_GRE:        # no flags, protocol type 0x0800
        l4 = struct.pack("!HH", 0, 0x0800) + payload
    else:
        l4 = payload
    ip = struct.pack("!BBHHHBBHII", 0x45, 0, ip_len, ident & 0xFFFF, 0x4000, 64, p, 0,
                     flow.src_ip, flow.dst_ip)
    ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
    return eth + ip + l4


def parse_frame(frame: bytes) -> Flow | None:
    """The flow fields of an Ethernet[/802.1Q]/IPv4 frame, or None if it is not IPv4."""
    if len(frame) < 14:
        return None
    dst_mac, src_mac = frame[0:6], frame[6:12]
    (etype,) = struct.unpack_from("!H", frame, 12)
    off, vlan = 14, 0
    if etype == ETH_P_8021Q and len(frame) >= 18:
        tci, etype = struct.unpack_from("!HH", frame, 14)
        vlan, off = tci & 0x0FFF, 18
    if etype != ETH_P_IP or len(frame) < off + 20 or frame[off] >> 4 != 4:
        return None
    ihl = (frame[off] & 0xF) * 4
    proto = frame[off + 9]
    src, dst = struct.unpack_from("!II", frame, off + 12)
    (frag,) = struct.unpack_from("!H", frame, off + 6)
    sport = dport = 0
    l4 = off + ihl
    if frag & 0x1FFF == 0 and len(frame) >= l4 + 4:
        if proto in (PROTO_TCP, PROTO_UDP):
            sport, dport = struct.unpack_from("!HH", frame, l4)
        elif proto == PROTO_ICMP and len(frame) >= l4 + 8:
            sport, dport = struct.unpack_from("!HH", frame, l4 + 4)
    return Flow(src, dst, sport, dport, proto, src_mac, dst_mac, vlan)


def verify_checksums(frame: bytes) -> bool:
    """True if the IPv4 header checksum and the UDP/TCP/ICMP checksum are valid."""
    off = 18 if struct.unpack_from("!H", frame, 12)[0] == ETH_P_8021Q else 14
    ihl = (frame[off] & 0xF) * 4
    if checksum(frame[off:off + ihl]) != 0:
        return False
    (total,) = struct.unpack_from("!H", frame, off + 2)
    proto = frame[off + 9]
    src, dst = struct.unpack_from("!II", frame, off + 12)
    l4 = frame[off + ihl:off + total]
    if proto in (PROTO_UDP, PROTO_TCP):
        if proto == PROTO_UDP and l4[6:8] == b"\0\0":
            return True
        return checksum(_pseudo(src, dst, proto, len(l4)) + l4) == 0
    if proto == PROTO_ICMP:
        return checksum(l4) == 0
    return True


def write_pcap(path, frames, pps=1_000_000, snaplen=65535):
    """Write (index, frame) or frame items as classic microsecond pcap; packet i is
    stamped i/pps seconds. Returns the number of packets."""
    n = 0
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", PCAP_MAGIC_US, 2, 4, 0, 0, snaplen, LINKTYPE_ETHERNET))
        rec = struct.Struct("<IIII")
        for frame in frames:
            us = n * 1_000_000 // pps
            f.write(rec.pack(us // 1_000_000, us % 1_000_000, len(frame), len(frame)))
            f.write(frame)
            n += 1
    return n


def read_pcap(path):
    """Classic pcap (either byte order, micro- or nanosecond stamps) -> list of
    (timestamp seconds as float, frame bytes). Raises ValueError on a bad file."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        raise ValueError(f"{path}: too short for a pcap header")
    for endian in "<>":
        (magic,) = struct.unpack_from(endian + "I", data, 0)
        if magic in (PCAP_MAGIC_US, PCAP_MAGIC_NS):
            break
    else:
        raise ValueError(f"{path}: not a classic pcap file (pcapng is not supported)")
    div = 1e9 if magic == PCAP_MAGIC_NS else 1e6
    linktype = struct.unpack_from(endian + "I", data, 20)[0] & 0x0FFFFFFF
    if linktype != LINKTYPE_ETHERNET:
        raise ValueError(f"{path}: link type {linktype}, only Ethernet (1) is supported")
    rec = struct.Struct(endian + "IIII")
    out, off = [], 24
    while off + 16 <= len(data):
        sec, frac, incl, _orig = rec.unpack_from(data, off)
        off += 16
        if off + incl > len(data):
            raise ValueError(f"{path}: record at byte {off - 16} is cut short")
        out.append((sec + frac / div, data[off:off + incl]))
        off += incl
    return out
