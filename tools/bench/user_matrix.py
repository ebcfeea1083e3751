#!/usr/bin/env python3
"""Run `morpheus user-run` over the user-space pipelines x localities in one
sitting and write the table docs/benchmarks.md quotes: per row the generic
handler, Morpheus (traffic-independent, then with fast paths), the
configuration greedy exploration chose, the hand-specialized oracle, and
the cycles' compile and JIT times. The traces are generated once per
function and locality (tools/traces/gen_trace.py); each run's whole output
is kept beside the table.

Example (every row of docs/benchmarks.md's "One sitting" table):
  tools/bench/user_matrix.py --out /tmp/user-matrix
A quick look:
  tools/bench/user_matrix.py --rows nat --localities high --rounds 1 --repeat 1 --out /tmp/q
DPDK's tables beside ours (docs/benchmarks.md "DPDK's own tables"):
  tools/bench/user_matrix.py --rows router-20,router-500 --lpm dir24,linear,rte --out /tmp/d
  tools/bench/user_matrix.py --rows nat --hash rte --out /tmp/nat-rte-hash
"""
import argparse
import datetime
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
ROUTER = "nf/router/configs"

# name -> (trace generator's --nf and --config, user-run's arguments, LPM kinds)
PIPELINES = {
    "router-20": ("router", f"{ROUTER}/stanford-yozb-routes-20.txt",
                  ["--routes", f"{ROUTER}/stanford-yozb-routes-20.txt",
                   "--neighbors", f"{ROUTER}/stanford-neighbors.txt"]),
    "router-500": ("router", f"{ROUTER}/stanford-yozb-routes-500.txt",
                   ["--routes", f"{ROUTER}/stanford-yozb-routes-500.txt",
                    "--neighbors", f"{ROUTER}/stanford-neighbors.txt"]),
    "firewall": ("firewall", "nf/firewall/configs/classbench-fw1-449-rules.txt",
                 ["--nf", "firewall", "--rules",
                  "nf/firewall/configs/classbench-fw1-449-rules.txt"]),
    "nat": ("nat", "nf/nat/configs/nat.conf",
            ["--nf", "nat", "--config", "nf/nat/configs/nat.conf"]),
}
DEFAULT_ROWS = "router-20,router-500,firewall,nat"

VERSION = re.compile(r"^(generic|specialized|fast paths|oracle)\s+([\d.]+) Mpps\s+([\d.]+) ns/packet")
CYCLE = re.compile(r"^user-run: (specialized|fast paths) in ([\d.]+) ms(?: \(passes and O2\))? "
                   r"\+ ([\d.]+) ms \(JIT\)")
CHOSEN = re.compile(r"^  chosen (.*?)\s+([\d.]+) Mpps(?:\s+([+-][\d.]+) % over the generic)?")


def parse(text):
    """The numbers of one user-run output: Mpps and ns per version, the
    cycles' (passes, JIT) ms, the chosen configuration and its Mpps and
    gain over the exploration's generic trial."""
    result = {"versions": {}, "cycles": {}, "chosen": None}
    for line in text.splitlines():
        if m := VERSION.match(line):
            result["versions"][m[1]] = (float(m[2]), float(m[3]))
        elif m := CYCLE.match(line):
            result["cycles"][m[1]] = (float(m[2]), float(m[3]))
        elif m := CHOSEN.match(line):
            result["chosen"] = (m[1].strip(), float(m[2]), float(m[3]) if m[3] else 0.0)
    return result


def cell(result, version):
    if version not in result["versions"]:
        return "–"
    mpps, ns = result["versions"][version]
    if version == "generic":
        return f"{mpps:.2f} ({ns:.1f})"
    base = result["versions"]["generic"][0]
    return f"{mpps:.2f} ({ns:.1f}) {(mpps / base - 1) * 100:+.1f} %"


def row(name, lpm, locality, result):
    chosen = result["chosen"]
    cycles = result["cycles"]
    times = " / ".join(f"{passes:.1f} + {jit:.1f}" for passes, jit in
                       (cycles.get("specialized", (0, 0)), cycles.get("fast paths", (0, 0))))
    return (f"| {name} | {lpm} | {locality} | {cell(result, 'generic')} | "
            f"{cell(result, 'specialized')} | {cell(result, 'fast paths')} | "
            f"{cell(result, 'oracle')} | "
            f"{chosen[0] if chosen else '–'} | "
            f"{f'{chosen[1]:.2f} {chosen[2]:+.1f} %' if chosen else '–'} | {times} |")


HEADER = ("| function | LPM | locality | generic Mpps (ns) | Morpheus (ns) | + fast paths (ns) | "
          "oracle (ns) | chosen by exploration | chosen Mpps, vs generic | "
          "cycle ms, passes+O2 + JIT (specialized / fast paths) |\n"
          "|---|---|---|---|---|---|---|---|---|---|")


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="directory for traces, outputs and table.md")
    ap.add_argument("--morpheus", default=os.environ.get(
        "MORPHEUS_BIN", os.path.join(SOURCE, "build/bin/morpheus")))
    ap.add_argument("--rows", default=DEFAULT_ROWS, help=f"of {DEFAULT_ROWS}")
    ap.add_argument("--lpm", default="dir24,linear", help="LPM kinds (default dir24,linear)")
    ap.add_argument("--hash", default="own",
                    help="exact-match tables of every row: own (default) or rte (DPDK's rte_hash)")
    ap.add_argument("--localities", default="none,low,high")
    ap.add_argument("--flows", type=int, default=1000)
    ap.add_argument("--packets", type=int, default=100000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--explore-windows", type=int, default=3)
    a = ap.parse_args(argv)

    os.makedirs(a.out, exist_ok=True)
    lines = []
    started = datetime.datetime.now(datetime.timezone.utc)
    load_before = uptime()
    for name in a.rows.split(","):
        if name not in PIPELINES:
            ap.error(f"--rows: no pipeline '{name}' (expected some of {DEFAULT_ROWS})")
        nf, config, arguments = PIPELINES[name]
        for locality in a.localities.split(","):
            trace = os.path.join(a.out, f"{name}-{locality}.pcap")
            if not os.path.exists(trace):
                subprocess.run([sys.executable, os.path.join(SOURCE, "tools/traces/gen_trace.py"),
                                "--nf", nf, "--config", os.path.join(SOURCE, config),
                                "--flows", str(a.flows), "--packets", str(a.packets),
                                "--locality", locality, "--seed", str(a.seed), "-q",
                                "-o", trace], check=True)
            for lpm in a.lpm.split(","):
                command = [a.morpheus, "user-run", *arguments, "--trace", trace, "--lpm", lpm,
                           "--hash", a.hash,
                           "--profile", "adaptive", "--oracle", "--rounds", str(a.rounds),
                           "--repeat", str(a.repeat), "--explore", "greedy",
                           "--explore-windows", str(a.explore_windows)]
                print("user_matrix: " + " ".join(command), file=sys.stderr, flush=True)
                done = subprocess.run(command, cwd=SOURCE, capture_output=True, text=True)
                output = os.path.join(a.out, f"{name}-{lpm}-{locality}.txt")
                with open(output, "w") as f:
                    f.write(done.stdout + done.stderr)
                if done.returncode != 0:
                    raise SystemExit(f"user_matrix: failed (exit {done.returncode}), see {output}")
                lines.append(row(name, lpm, locality, parse(done.stdout)))
    finished = datetime.datetime.now(datetime.timezone.utc)
    commit = subprocess.run(["git", "-C", SOURCE, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    table = "\n".join([
        f"Commit {commit}, {started:%Y-%m-%d %H:%M}–{finished:%H:%M} UTC.",
        f"Load before: {load_before}",
        f"Load after:  {uptime()}",
        "", HEADER, *lines, ""])
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
