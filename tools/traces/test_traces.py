"""Tests of tools/traces: flow sources, locality statistics, pcap and index files.
Run: python3 -m pytest -q tools/traces"""
import collections
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
ROOT = os.path.dirname(os.path.dirname(HERE))

from tracegen import (ConfigError, Flow, load_flows, parse_phases, generate,  # noqa: E402
                      build_frame, parse_frame, write_pcap, read_pcap, write_index, read_index)
from tracegen.flows import parse_fw_rules, parse_routes, fw_match, in_prefix  # noqa: E402
from tracegen.pcap import verify_checksums  # noqa: E402

CFG = os.path.join(ROOT, "nf")
ROUTES = os.path.join(CFG, "router/configs/stanford-yozb-routes-500.txt")
FW_FILES = [os.path.join(CFG, "firewall/configs", f) for f in
            ("classbench-fw1-449-rules.txt", "classbench-fw3-411-rules.txt",
             "generated-1000-rules.txt")]
F, N = 1000, 100_000


def top10(model, seed=1):
    seq = generate(F, N, parse_phases(model), seed)
    return sum(v for _, v in collections.Counter(seq).most_common(10)) / N


@pytest.fixture(scope="module")
def shares():
    return {m: top10(m) for m in ("uniform", "none", "low", "high", "zipf:1.1")}


def test_skew_ordered(shares):
    # Measured with seed 1, F=1000, N=100000 (README table): none 0.0130,
    # low 0.2476, high 0.9380, zipf:1.1 0.4813. Uniform's expectation for the top 10 of
    # 1000 flows is ~0.0128 (10/1000 plus the order-statistics excess).
    assert shares["none"] < 0.02
    assert 0.10 < shares["low"] < 0.60        # seeds 1..50: p5 0.102, p95 0.508
    assert shares["high"] > 0.60              # seeds 1..50: p5 0.610
    assert shares["none"] < shares["low"] < shares["high"]
    # Zipf(1.1) over 1000 ranks: sum_{k<=10} k^-1.1 / sum_{k<=1000} k^-1.1 = 0.4826
    assert abs(shares["zipf:1.1"] - 0.4826) < 0.01


def test_uniform_flat():
    seq = generate(F, N, parse_phases("uniform"), 7)
    c = collections.Counter(seq)
    assert len(c) == F
    mean = N / F
    assert all(abs(v - mean) < 5 * mean ** 0.5 for v in c.values())   # 5 sigma
    chi2 = sum((v - mean) ** 2 / mean for v in c.values())
    assert chi2 < 1150          # F-1 = 999 degrees of freedom, sd ~45: > 3 sigma


def test_zipf_rank_order():
    c = collections.Counter(generate(100, 200_000, parse_phases("zipf:1.0"), 3))
    # rank 1 gets twice rank 2's share, ten times rank 10's (within sampling noise)
    assert abs(c[0] / c[1] - 2) < 0.1 and abs(c[0] / c[9] - 10) < 1.0


def test_bursts_high_consecutive():
    seq = generate(F, N, parse_phases("high"), 1)
    runs = sum(1 for i in range(1, len(seq)) if seq[i] != seq[i - 1]) + 1
    assert runs < 200           # long bursts: few flow changes
    seq = generate(F, N, parse_phases("none"), 1)
    assert sum(1 for i in range(1, len(seq)) if seq[i] == seq[i - 1]) < 0.005 * N


def test_phases_switch_sets():
    ph = parse_phases("uniform/10000,high/5000/A,zipf:1.2/5000/B,uniform")
    seq = generate(100, 30000, ph, 5)
    assert len(seq) == 30000
    assert set(seq[:10000]) == set(range(100))
    assert set(seq[10000:15000]) <= set(range(0, 50))
    assert set(seq[15000:20000]) <= set(range(50, 100))
    assert len(set(seq[20000:])) == 100
    with pytest.raises(ValueError):
        parse_phases("bogus/10")
    with pytest.raises(ValueError):
        generate(10, 100, parse_phases("uniform/200,uniform"), 1)


def test_router_destinations_in_prefixes(tmp_path):
    flows = load_flows("router", ROUTES, 2000, 1)
    routes = parse_routes(ROUTES)
    assert len({f.key() for f in flows}) == 2000
    for f in flows:
        assert in_prefix(f.dst_ip, *routes[f.origin])
    # without the default route, "inside some prefix" is a real check
    cfg = tmp_path / "r.txt"
    cfg.write_text("".join(l for l in open(ROUTES) if not l.startswith("0.0.0.0/0")))
    specific = parse_routes(str(cfg))
    for f in load_flows("router", str(cfg), 2000, 2):
        assert any(in_prefix(f.dst_ip, *p) for p in specific)


@pytest.mark.parametrize("path", FW_FILES)
def test_firewall_tuples_match_rule(path):
    rules = parse_fw_rules(path)
    for f in load_flows("firewall", path, 1500, 1):
        assert fw_match(rules[f.origin], f), (f, rules[f.origin])


def test_other_sources():
    lb = load_flows("lb", os.path.join(CFG, "lb/configs/example.conf"), 300, 1)
    vips = {(0xC000020A, 80, 6), (0xC000020A, 443, 6), (0xC0000235, 53, 17), (0xC0000214, 443, 17)}
    assert {(f.dst_ip, f.dport, f.proto) for f in lb} == vips
    nat = load_flows("nat", os.path.join(CFG, "nat/configs/nat.conf"), 300, 1)
    for f in nat:
        assert in_prefix(f.src_ip, 0xC0A80000, 16) or in_prefix(f.src_ip, 0x0A000000, 8)
        assert not in_prefix(f.dst_ip, 0xC0A80000, 16) and not in_prefix(f.dst_ip, 0x0A000000, 8)
    l2 = load_flows("l2switch", os.path.join(CFG, "l2switch/configs/ports.conf"), 300, 1)
    assert {f.vlan for f in l2} == {10, 20} | set(range(100, 110))   # first trunk eth5
    assert all(not (f.src_mac[0] & 1) and not (f.dst_mac[0] & 1) for f in l2)


def test_config_errors(tmp_path):
    bad = tmp_path / "rules.txt"
    bad.write_text("src=1.2.3.0/24 action=ACCEPT\nsrc=1.2.3.4/33 action=DROP\n")
    with pytest.raises(ConfigError, match=r"rules.txt:2: bad prefix"):
        load_flows("firewall", str(bad), 10, 1)
    bad.write_text("10.0.0.0/8 1.2.3.4\n# c\nnot-a-route\n")
    with pytest.raises(ConfigError, match=r"rules.txt:3:"):
        load_flows("router", str(bad), 10, 1)
    with pytest.raises(ConfigError, match="cannot draw"):
        load_flows("firewall", _one_host_rule(tmp_path), 10, 1)


def _one_host_rule(tmp_path):
    p = tmp_path / "one.txt"
    p.write_text("src=1.1.1.1 dst=2.2.2.2 l4proto=TCP sport=1 dport=2 action=ACCEPT\n")
    return str(p)


def test_pcap_roundtrip(tmp_path):
    flows = (load_flows("firewall", FW_FILES[1], 50, 1) + load_flows("l2switch",
             os.path.join(CFG, "l2switch/configs/ports.conf"), 50, 1) +
             load_flows("lb", os.path.join(CFG, "lb/configs/example.conf"), 20, 1))
    # ICMP, GRE and TCP frames too
    flows += [Flow(0x01020304, 0x05060708, 7, 9, 1), Flow(0x01020304, 0x05060708, 7, 9, 6),
              Flow(0x01020304, 0x05060708, 0, 0, 47)]
    frames = [build_frame(f, size, i) for i, f in enumerate(flows) for size in (64, 60, 200)]
    path = tmp_path / "t.pcap"
    assert write_pcap(str(path), frames, pps=1000) == len(frames)
    back = read_pcap(str(path))
    assert [f for _, f in back] == frames
    assert back[1][0] == pytest.approx(0.001)
    for i, fr in enumerate(frames):
        assert verify_checksums(fr)
        assert len(fr) >= 60
        f = flows[i // 3]
        assert parse_frame(fr).key() == f.key()
    assert not verify_checksums(frames[0][:30] + bytes([frames[0][30] ^ 1]) + frames[0][31:])


def test_cli_and_index(tmp_path):
    out, idx = tmp_path / "o.pcap", tmp_path / "o.idx"
    r = subprocess.run([sys.executable, os.path.join(HERE, "gen_trace.py"), "--nf", "router",
                        "--config", ROUTES, "--flows", "100", "--packets", "5000",
                        "--locality", "zipf:1.1", "--seed", "1", "-o", str(out),
                        "--index", str(idx)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    frames = [f for _, f in read_pcap(str(out))]
    size, recs = read_index(str(idx))
    assert len(frames) == len(recs) == 5000 and size == 64
    for fr, (fl, _) in zip(frames, recs):
        assert parse_frame(fr).key() == fl.key()
    r = subprocess.run([sys.executable, os.path.join(HERE, "gen_trace.py"), "--replay", str(out),
                        "--index", str(tmp_path / "r.idx"), "-q"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert [f.key() for f, _ in read_index(str(tmp_path / "r.idx"))[1]] == \
        [f.key() for f, _ in recs]
    r = subprocess.run([sys.executable, os.path.join(HERE, "gen_trace.py"), "--nf", "router",
                        "--config", "/nonexistent.txt", "-o", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "/nonexistent.txt" in r.stderr
    write_index(str(tmp_path / "j.idx"), [recs[0][0]], [0, 0], 64, "jsonl")
    assert len(open(tmp_path / "j.idx").read().splitlines()) == 2
