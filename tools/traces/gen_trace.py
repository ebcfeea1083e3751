#!/usr/bin/env python3
"""Generate a pcap trace (and a flow-index file) with controlled locality for the
Morpheus network functions, or convert a real capture to a flow-index file.

Examples:
  gen_trace.py --nf router --config nf/router/configs/stanford-yozb-routes-500.txt \\
      --flows 1000 --packets 100000 --locality high --seed 1 -o out.pcap --index out.idx
  gen_trace.py --nf firewall --config nf/firewall/configs/classbench-fw1-449-rules.txt \\
      --flows 1000 --packets 100000 --phases 'uniform/50000,high/25000/A,high/25000/B' -o fw.pcap
  gen_trace.py --replay capture.pcap --index capture.idx

Locality: none|low|high (Pareto bursts, alpha=1, beta=0|0.0001|1), uniform, zipf:S,
pareto:ALPHA:BETA. Phases: comma-separated MODEL[/PACKETS[/SET]]; SET 'all' (default)
or a name: the distinct names split the flow set into equal disjoint slices.
See tools/traces/README.md for the exact definitions and file formats.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tracegen import (ConfigError, load_flows, parse_model, parse_phases, generate,  # noqa: E402
                      build_frame, parse_frame, write_pcap, read_pcap, write_index, SOURCES)
from tracegen.locality import Phase  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nf", choices=sorted(SOURCES), help="network function the flows are for")
    ap.add_argument("--config", help="its configuration file (routes, rules, lb/nat conf, ports.conf)")
    ap.add_argument("--flows", type=int, default=1000, help="distinct flows F (default 1000)")
    ap.add_argument("--packets", type=int, default=100000, help="packets (default 100000)")
    ap.add_argument("--locality", default="none",
                    help="none|low|high|uniform|zipf:S|pareto:A:B (default none)")
    ap.add_argument("--phases", help="MODEL[/PACKETS[/SET]],... (overrides --locality)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--size", type=int, default=64, help="frame bytes without FCS (default 64)")
    ap.add_argument("--pps", type=int, default=1_000_000, help="timestamp rate (default 1e6)")
    ap.add_argument("-o", "--output", help="pcap file to write")
    ap.add_argument("--index", help="flow-index file to write")
    ap.add_argument("--index-format", choices=("bin", "jsonl"), default="bin")
    ap.add_argument("--replay", metavar="PCAP", help="read a real capture instead of generating")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    a = ap.parse_args(argv)

    def say(msg):
        if not a.quiet:
            print(msg, file=sys.stderr, flush=True)

    try:
        if a.replay:
            if not a.index and not a.output:
                ap.error("--replay needs --index and/or -o")
            recs = read_pcap(a.replay)
            flows, seq, ids = [], [], {}
            for _, frame in recs:
                fl = parse_frame(frame)
                if fl is None:
                    continue
                fid = ids.setdefault(fl.key(), len(flows))
                if fid == len(flows):
                    flows.append(fl)
                seq.append(fid)
            say(f"{a.replay}: {len(recs)} frames, {len(seq)} IPv4, {len(flows)} flows")
            if a.index:
                write_index(a.index, flows, seq, 0, a.index_format)
            if a.output:
                write_pcap(a.output, (f for _, f in recs), a.pps)
            return 0

        if not a.nf or not a.config or not a.output:
            ap.error("--nf, --config and -o are required (or --replay)")
        if a.flows < 1 or a.packets < 1:
            ap.error("--flows and --packets must be positive")
        try:
            phases = parse_phases(a.phases) if a.phases else [Phase(parse_model(a.locality), None)]
        except ValueError as e:
            ap.error(str(e))
        t0 = time.monotonic()
        flows = load_flows(a.nf, a.config, a.flows, a.seed)
        say(f"{len(flows)} flows from {a.config}")
        big = a.packets >= 1_000_000

        def progress(n):
            if big:
                say(f"  sequence: {n} packets")
        try:
            seq = generate(len(flows), a.packets, phases, a.seed + 1, progress)
        except ValueError as e:
            ap.error(str(e))
        cache = {}
        step = max(1, len(seq) // 10)

        def frames():
            for i, fid in enumerate(seq):
                fr = cache.get(fid)
                if fr is None:
                    fr = cache[fid] = build_frame(flows[fid], a.size, fid)
                if big and i and i % step == 0:
                    say(f"  pcap: {i}/{len(seq)} packets ({100 * i // len(seq)}%)")
                yield fr
        n = write_pcap(a.output, frames(), a.pps)
        if a.index:
            write_index(a.index, flows, seq, len(next(iter(cache.values()))), a.index_format)
        say(f"wrote {n} packets to {a.output}" + (f" and {a.index}" if a.index else "")
            + f" in {time.monotonic() - t0:.1f} s")
        return 0
    except (ConfigError, ValueError, OSError) as e:
        print(f"gen_trace.py: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
