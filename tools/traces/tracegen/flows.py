"""Flow sets derived from the configuration files of nf/{router,firewall,lb,nat,l2switch}.

Each source returns a list of distinct Flow objects. Flow.origin is the index of the
config entry (route, rule, VIP, inside prefix, VLAN/static entry) the flow was drawn from.
"""
from __future__ import annotations

import ipaddress
import random
from dataclasses import dataclass, field

PROTO_ICMP, PROTO_TCP, PROTO_UDP, PROTO_GRE = 1, 6, 17, 47
PROTO_NAMES = {"icmp": PROTO_ICMP, "tcp": PROTO_TCP, "udp": PROTO_UDP, "gre": PROTO_GRE}

DEFAULT_SRC_MAC = bytes.fromhex("020000000001")
DEFAULT_DST_MAC = bytes.fromhex("020000000002")
# Client addresses for router/lb sources: the benchmarking range 198.18.0.0/15 (RFC 2544).
CLIENT_NET = (0xC6120000, 15)


class ConfigError(Exception):
    """A bad configuration line; the message is 'FILE:LINE: what'."""


@dataclass(frozen=True)
class Flow:
    src_ip: int                 # host integers
    dst_ip: int
    sport: int = 0
    dport: int = 0
    proto: int = PROTO_UDP
    src_mac: bytes = DEFAULT_SRC_MAC
    dst_mac: bytes = DEFAULT_DST_MAC
    vlan: int = 0               # 802.1Q VID, 0 = untagged
    origin: int = field(default=-1, compare=False)

    def key(self):
        return (self.src_ip, self.dst_ip, self.sport, self.dport, self.proto,
                self.src_mac, self.dst_mac, self.vlan)


# ---------------------------------------------------------------- small parsers

def _lines(path):
    """Yield (lineno, tokens) of non-empty lines with '#' comments removed."""
    try:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                toks = line.split("#", 1)[0].split()
                if toks:
                    yield n, toks
    except OSError as e:
        raise ConfigError(f"{path}: {e.strerror}") from None


def parse_prefix(text, where):
    """'A.B.C.D[/LEN]' -> (network int, len). Host bits beyond LEN are cleared."""
    try:
        net = ipaddress.IPv4Network(text, strict=False)
    except ValueError:
        raise ConfigError(f"{where}: bad prefix '{text}'") from None
    return int(net.network_address), net.prefixlen


def parse_addr(text, where):
    try:
        return int(ipaddress.IPv4Address(text))
    except ValueError:
        raise ConfigError(f"{where}: bad IPv4 address '{text}'") from None


def parse_mac(text, where):
    parts = text.split(":")
    if len(parts) != 6 or not all(len(p) in (1, 2) for p in parts):
        raise ConfigError(f"{where}: bad MAC address '{text}'")
    try:
        return bytes(int(p, 16) for p in parts)
    except ValueError:
        raise ConfigError(f"{where}: bad MAC address '{text}'") from None


def parse_range(text, where, lo=0, hi=65535):
    a, sep, b = text.replace("-", ":").partition(":")
    try:
        x, y = int(a), int(b) if sep else int(a)
    except ValueError:
        raise ConfigError(f"{where}: bad range '{text}'") from None
    if not (lo <= x <= y <= hi):
        raise ConfigError(f"{where}: range '{text}' outside {lo}..{hi} or empty")
    return x, y


def in_prefix(addr, net, plen):
    mask = (0xFFFFFFFF << (32 - plen)) & 0xFFFFFFFF
    return (addr & mask) == net


def rand_in_prefix(rng, net, plen):
    return net | (rng.getrandbits(32 - plen) if plen < 32 else 0)


def rand_mac(rng):
    """Random unicast, locally administered MAC."""
    b = bytearray(rng.getrandbits(8) for _ in range(6))
    b[0] = (b[0] & 0xFC) | 0x02
    return bytes(b)


def _unicast_routable(a):
    first = a >> 24
    return first not in (0, 127) and first < 224


# ---------------------------------------------------------------- sources

def parse_routes(path):
    """Router routes: 'PREFIX NEXTHOP [PORT]'. Returns [(net, len)] without local routes."""
    routes = []
    for n, t in _lines(path):
        where = f"{path}:{n}"
        if len(t) < 2:
            raise ConfigError(f"{where}: expected 'PREFIX NEXTHOP [PORT]'")
        if t[1] == "local":
            continue
        routes.append(parse_prefix(t[0], where))
    if not routes:
        raise ConfigError(f"{path}: no forwarding routes")
    return routes


def router_flows(path, count, rng):
    routes = parse_routes(path)

    def draw():
        i = rng.randrange(len(routes))
        net, plen = routes[i]
        for _ in range(64):     # avoid multicast/reserved destinations (the router passes them)
            dst = rand_in_prefix(rng, net, plen)
            if _unicast_routable(dst) or plen >= 8:
                break
        return Flow(rand_in_prefix(rng, *CLIENT_NET), dst, rng.randint(1024, 65535),
                    rng.randint(1, 65535), PROTO_UDP, origin=i)
    return _distinct(draw, count, path)


def parse_fw_rules(path):
    """ClassBench rules: key=value tokens src, dst, l4proto, sport, dport, action."""
    rules = []
    for n, t in _lines(path):
        where = f"{path}:{n}"
        r = {"src": (0, 0), "dst": (0, 0), "proto": None, "sport": None, "dport": None}
        for tok in t:
            k, eq, v = tok.partition("=")
            if not eq:
                raise ConfigError(f"{where}: expected key=value, got '{tok}'")
            k = k.lower()
            if k in ("src", "dst"):
                r[k] = parse_prefix(v, where)
            elif k == "l4proto":
                if v.lower() not in PROTO_NAMES:
                    raise ConfigError(f"{where}: unknown protocol '{v}'")
                r["proto"] = PROTO_NAMES[v.lower()]
            elif k in ("sport", "dport"):
                r[k] = parse_range(v, where)
            elif k == "action":
                pass
            else:
                raise ConfigError(f"{where}: unknown field '{k}'")
        rules.append(r)
    if not rules:
        raise ConfigError(f"{path}: no rules")
    return rules


def fw_flows(path, count, rng):
    rules = parse_fw_rules(path)

    def draw():
        i = rng.randrange(len(rules))
        r = rules[i]
        proto = r["proto"] or rng.choice((PROTO_TCP, PROTO_UDP))
        sport = dport = 0
        if proto in (PROTO_TCP, PROTO_UDP):
            sport = rng.randint(*(r["sport"] or (0, 65535)))
            dport = rng.randint(*(r["dport"] or (0, 65535)))
        return Flow(rand_in_prefix(rng, *r["src"]), rand_in_prefix(rng, *r["dst"]),
                    sport, dport, proto, origin=i)
    return _distinct(draw, count, path)


def fw_match(rule, flow):
    """Does flow match the rule (as parsed by parse_fw_rules)?"""
    if not in_prefix(flow.src_ip, *rule["src"]) or not in_prefix(flow.dst_ip, *rule["dst"]):
        return False
    if rule["proto"] is not None and flow.proto != rule["proto"]:
        return False
    for k, v in (("sport", flow.sport), ("dport", flow.dport)):
        rng_ = rule[k]
        if rng_ and rng_ != (0, 65535):
            if flow.proto not in (PROTO_TCP, PROTO_UDP) or not rng_[0] <= v <= rng_[1]:
                return False
    return True


def parse_lb_vips(path):
    """lb: 'vip ADDRESS:PORT/tcp|udp [quic]' lines; other directives are ignored."""
    vips = []
    for n, t in _lines(path):
        if t[0] != "vip":
            continue
        where = f"{path}:{n}"
        if len(t) < 2 or ":" not in t[1] or "/" not in t[1]:
            raise ConfigError(f"{where}: expected 'vip ADDRESS:PORT/tcp|udp'")
        hostport, _, proto = t[1].rpartition("/")
        host, _, port = hostport.rpartition(":")
        if proto.lower() not in ("tcp", "udp"):
            raise ConfigError(f"{where}: protocol must be tcp or udp, got '{proto}'")
        p = parse_range(port, where, 1, 65535)[0]
        vips.append((parse_addr(host, where), p, PROTO_NAMES[proto.lower()]))
    if not vips:
        raise ConfigError(f"{path}: no 'vip' lines")
    return vips


def lb_flows(path, count, rng):
    vips = parse_lb_vips(path)

    def draw():
        i = rng.randrange(len(vips))
        addr, port, proto = vips[i]
        return Flow(rand_in_prefix(rng, *CLIENT_NET), addr, rng.randint(1024, 65535),
                    port, proto, origin=i)
    return _distinct(draw, count, path)


PRIVATE = [(0x0A000000, 8), (0xAC100000, 12), (0xC0A80000, 16), (0x64400000, 10)]


def parse_nat(path):
    """nat: 'inside PREFIX' and 'external ADDRESS' lines; other directives are ignored."""
    inside, external = [], []
    for n, t in _lines(path):
        where = f"{path}:{n}"
        if t[0] in ("inside", "external") and len(t) != 2:
            raise ConfigError(f"{where}: expected '{t[0]} VALUE'")
        if t[0] == "inside":
            inside.append(parse_prefix(t[1], where))
        elif t[0] == "external":
            external.append(parse_addr(t[1], where))
    if not inside:
        raise ConfigError(f"{path}: no 'inside' prefix")
    return inside, external


def nat_flows(path, count, rng):
    inside, external = parse_nat(path)
    avoid = inside + PRIVATE

    def draw():
        i = rng.randrange(len(inside))
        src = rand_in_prefix(rng, *inside[i])
        while True:             # a public, unicast, non-inside, non-external destination
            dst = rng.getrandbits(32)
            if _unicast_routable(dst) and dst not in external and \
                    not any(in_prefix(dst, *p) for p in avoid):
                break
        proto = rng.choice((PROTO_TCP, PROTO_UDP))
        dport = rng.choice((53, 80, 443, 8080)) if rng.random() < 0.5 else rng.randint(1, 65535)
        return Flow(src, dst, rng.randint(1024, 65535), dport, proto, origin=i)
    return _distinct(draw, count, path)


def parse_l2(path):
    """l2switch: ports.conf ('PORT access|trunk VLANS [native=N]') -> [(vlan, None)] of the
    VLANs the first trunk carries tagged (untagged VLAN 0 for its native VLAN; all
    access VLANs untagged if there is no trunk); static.conf ('MAC VLAN PORT') ->
    [(vlan, mac)] destinations."""
    ports, static = [], []
    for n, t in _lines(path):
        where = f"{path}:{n}"
        if len(t) >= 3 and t[1] in ("access", "trunk"):
            vlans = set()
            native = None
            for part in t[2].split(","):
                lo, hi = parse_range(part, where, 1, 4094)
                vlans.update(range(lo, hi + 1))
            for opt in t[3:]:
                k, _, v = opt.partition("=")
                if k == "native":
                    native = parse_range(v, where, 1, 4094)[0]
            ports.append((t[1], sorted(vlans), native))
        elif len(t) == 3 and t[0].count(":") == 5:
            static.append((parse_range(t[1], where, 1, 4094)[0], parse_mac(t[0], where)))
        else:
            raise ConfigError(f"{where}: expected 'PORT access|trunk VLANS' or 'MAC VLAN PORT'")
    if static:
        return static
    trunks = [p for p in ports if p[0] == "trunk"]
    if trunks:
        _, vlans, native = trunks[0]
        out = [(v, None) for v in vlans if v != native]
        if native is not None:
            out.append((0, None))
        return out
    if ports:
        return [(0, None)]
    raise ConfigError(f"{path}: no ports or static entries")


def l2_flows(path, count, rng):
    entries = parse_l2(path)

    def draw():
        i = rng.randrange(len(entries))
        vlan, mac = entries[i]
        return Flow(rand_in_prefix(rng, 0x0A000000, 8), rand_in_prefix(rng, 0x0A000000, 8),
                    rng.randint(1024, 65535), rng.randint(1, 65535), PROTO_UDP,
                    src_mac=rand_mac(rng), dst_mac=mac or rand_mac(rng), vlan=vlan, origin=i)
    return _distinct(draw, count, path)


def _distinct(draw, count, path):
    seen, out = set(), []
    tries = 0
    while len(out) < count:
        f = draw()
        tries += 1
        if f.key() not in seen:
            seen.add(f.key())
            out.append(f)
        elif tries > 20 * count + 1000:
            raise ConfigError(f"{path}: cannot draw {count} distinct flows "
                              f"(only {len(out)} found)")
    return out


SOURCES = {"router": router_flows, "firewall": fw_flows, "lb": lb_flows,
           "nat": nat_flows, "l2switch": l2_flows}


def load_flows(nf, path, count, seed):
    if nf not in SOURCES:
        raise ConfigError(f"unknown network function '{nf}' (one of {', '.join(SOURCES)})")
    return SOURCES[nf](path, count, random.Random(seed))
