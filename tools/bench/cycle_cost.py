#!/usr/bin/env python3
"""What a cycle costs, binary against binary: t1 (the tables' read) and t2
of forced recompiles, the first shadow validation and injection, and the
version's size, for each
preset, with the binaries alternated round by round on the same machine.

Each run is `BINARY bench PRESET --locality none --rounds 1 --packets 4096
--recompiles N --traffic-cycles 0 --json FILE` (the traffic part is as
short as bench allows: only the compile figures are read). Prints one table
of medians over the rounds, per preset and binary, and writes every run's
figures to --out as JSON.

  tools/bench/cycle_cost.py --binary main=/tmp/morpheus-main \\
      --binary branch=build/bin/morpheus --preset nat --preset lb --rounds 3
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run_once(binary, preset, recompiles, nice):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as out:
        path = out.name
    command = ["nice", "-n", str(nice), binary, "bench", preset, "--locality", "none",
               "--rounds", "1", "--packets", "4096", "--recompiles", str(recompiles),
               "--traffic-cycles", "0", "--json", path]
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        sys.exit(f"cycle_cost: {' '.join(command)} failed:\n{done.stdout[-2000:]}")
    with open(path) as f:
        result = json.load(f)
    os.unlink(path)
    compile_ = result["compile"]
    return {
        "t1_median_ms": compile_["t1_ms"]["median"],
        "first_t1_ms": compile_["first_t1_ms"],
        "t2_median_ms": compile_["t2_ms"]["median"],
        "first_t2_ms": compile_["first_t2_ms"],
        "first_validation_ms": compile_["first_validation_ms"],
        "first_injection_ms": compile_["first_injection_ms"],
        "instructions": compile_["instructions_specialized"],
        "t2_phases": {p["phase"]: p["ms"]["median"] for p in compile_["t2_phases"]},
        "validation_phases": {p["phase"]: p["ms"]
                              for p in compile_.get("first_validation_phases", [])},
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", action="append", required=True, metavar="LABEL=PATH")
    parser.add_argument("--preset", action="append", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--recompiles", type=int, default=5)
    parser.add_argument("--nice", type=int, default=0,
                        help="niceness of the measured runs (negative on a shared machine)")
    parser.add_argument("--out", default="cycle_cost.json")
    args = parser.parse_args()
    binaries = [tuple(b.split("=", 1)) for b in args.binary]
    runs = {}
    for round_ in range(args.rounds):
        for preset in args.preset:
            order = binaries if round_ % 2 == 0 else list(reversed(binaries))
            for label, path in order:
                figures = run_once(path, preset, args.recompiles, args.nice)
                runs.setdefault(preset, {}).setdefault(label, []).append(figures)
                print(f"round {round_ + 1}: {preset} {label}: t1 {figures['t1_median_ms']:.1f} ms, "
                      f"t2 {figures['t2_median_ms']:.1f} ms, "
                      f"validation {figures['first_validation_ms']:.1f}, injection "
                      f"{figures['first_injection_ms']:.1f}, {figures['instructions']} insns",
                      flush=True)
    with open(args.out, "w") as f:
        json.dump(runs, f, indent=1)
    keys = ["t1_median_ms", "t2_median_ms", "first_validation_ms", "first_injection_ms"]
    print("\n| preset | binary | t1 recompile (ms) | t2 recompile (ms) | validation (ms) "
          "| injection (ms) | t1+t2+validation+injection | instructions |")
    print("|---|---|---|---|---|---|---|---|")
    for preset, by_label in runs.items():
        for label, figures in by_label.items():
            med = {k: statistics.median(f[k] for f in figures) for k in keys}
            print(f"| {preset} | {label} | {med['t1_median_ms']:.1f} | {med['t2_median_ms']:.1f} | "
                  f"{med['first_validation_ms']:.1f} | {med['first_injection_ms']:.1f} | "
                  f"{sum(med.values()):.1f} | {figures[0]['instructions']} |")


if __name__ == "__main__":
    main()
