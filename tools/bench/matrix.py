#!/usr/bin/env python3
"""Run `morpheus bench` over network functions x localities and write the
results: one JSON per function, a combined results.json, matrix.md (the
tables docs/benchmarks.md quotes) and PNG plots (speed-up bars per locality,
compile times).

Example (the 2026-11-22 matrix, whose compile table docs/benchmarks.md quotes
under "Compilation and injection"; about 10 minutes):
  tools/bench/matrix.py --out bench-results
A quick look:
  tools/bench/matrix.py --nf router,lb --packets 65536 --rounds 5 --out /tmp/quick
"""
import argparse
import datetime
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
DEFAULT_NFS = "l2switch,router,router-20routes,nat,firewall,lb"


def run_one(morpheus, nf, args, out_dir):
    json_path = os.path.join(out_dir, f"{nf}.json")
    command = [morpheus, "bench", nf, "--locality", args.locality, "--packets",
               str(args.packets), "--flows", str(args.flows), "--rounds", str(args.rounds),
               "--seed", str(args.seed), "--method", args.method, "--json", json_path]
    if args.phases:
        command += ["--phases", args.phases]
    if args.adapt_period:
        command += ["--adapt-period", str(args.adapt_period)]
    print(f"matrix: {' '.join(command)}", file=sys.stderr, flush=True)
    with open(os.path.join(out_dir, f"{nf}.txt"), "w") as table:
        # Progress goes to our stderr as it comes; the tables to a file.
        status = subprocess.run(command, stdout=table, stderr=None).returncode
    if status != 0:
        raise SystemExit(f"matrix: `morpheus bench {nf}` failed (exit {status}); "
                         f"see the messages above")
    with open(json_path) as f:
        return json.load(f)


def variant(trace, name):
    return next((v for v in trace["variants"] if v["name"] == name), None)


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")


def speedup_cell(v):
    return f"{v['net_ns']['median']:.1f} (**{v['speedup_net']['median']:.2f}x**)" if v else "-"


def oracle_cell(oracles):
    if not oracles:
        return "-"
    best = min(oracles, key=lambda v: v["net_ns"]["median"])
    return f"{best['name']} {best['net_ns']['median']:.1f} ({best['speedup_net']['median']:.2f}x)"


def markdown(results, meta):
    """The matrix: per function and locality, net ns per packet and the median
    of the per-round speed-ups of the traffic-independent version (static),
    the loop following the traffic, the version chosen by measurement
    (explored), the best oracle an equivalent program could be, and the best
    one skipping lookups the function must make (headroom)."""
    lines = [f"Command: `{meta['command']}`  ", f"Date {meta['date']}, commit {meta['commit']}, "
             f"load {meta['load']}, "
             f"{meta['packets']} packets x {meta['flows']} flows per trace, "
             f"{meta['rounds']} rounds, seed {meta['seed']}, {meta['method']} method.", "",
             "| function | locality | top-10 share | baseline net ns | morpheus-static | "
             "morpheus (loop) | morpheus-explored | best equivalent oracle | skipping lookups |",
             "|---|---|---|---|---|---|---|---|---|"]
    for result in results:
        for trace in result["traces"]:
            if trace["segments"] > 1:
                continue  # phased traces have their own plots
            oracles = [v for v in trace["variants"] if v["name"].startswith("oracle")]
            lines.append(
                f"| {result['preset']} | {trace['name']} | {trace['top10_share']:.3f} | "
                f"{variant(trace, 'baseline')['net_ns']['median']:.1f} | "
                f"{speedup_cell(variant(trace, 'morpheus-static'))} | "
                f"{speedup_cell(variant(trace, 'morpheus'))} | "
                f"{speedup_cell(variant(trace, 'morpheus-explored'))} | "
                f"{oracle_cell([v for v in oracles if not v.get('skips_lookups')])} | "
                f"{oracle_cell([v for v in oracles if v.get('skips_lookups')])} |")
    lines += ["", "| function | t1 first (ms) | t2 first (ms) | shadow validation (ms) | "
              "injection (ms) | t1 median (ms) | t2 median (ms) | instructions original -> "
              "specialized | specialized |",
              "|---|---|---|---|---|---|---|---|---|"]
    for result in results:
        c = result["compile"]
        lines.append(f"| {result['preset']} | {c['first_t1_ms']:.2f} | {c['first_t2_ms']:.1f} | "
                     f"{c.get('first_validation_ms', 0):.1f} | "
                     f"{c['first_injection_ms']:.2f} | {c['t1_ms']['median']:.2f} | "
                     f"{c['t2_ms']['median']:.1f} | {c['instructions_original']} -> "
                     f"{c['instructions_specialized']} | {'; '.join(c['applied'])} |")
    return "\n".join(lines) + "\n"


def plot(results, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    localities = sorted({t["name"] for r in results for t in r["traces"] if t["segments"] == 1},
                        key=lambda n: ["none", "low", "high"].index(n)
                        if n in ("none", "low", "high") else 99)
    fig, axes = plt.subplots(1, len(localities), figsize=(4.5 * len(localities), 4),
                             sharey=True, squeeze=False)
    for ax, locality in zip(axes[0], localities):
        names, morpheus, oracle = [], [], []
        for result in results:
            trace = next((t for t in result["traces"] if t["name"] == locality), None)
            if not trace:
                continue
            names.append(result["preset"])
            morpheus.append(variant(trace, "morpheus")["speedup_net"]["median"])
            oracles = [v["speedup_net"]["median"] for v in trace["variants"]
                       if v["name"].startswith("oracle")]
            oracle.append(max(oracles) if oracles else 0)
        xs = range(len(names))
        ax.bar([x - 0.2 for x in xs], morpheus, 0.4, label="Morpheus")
        ax.bar([x + 0.2 for x in xs], oracle, 0.4, label="best oracle")
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(list(xs), names, rotation=30, ha="right")
        ax.set_title(f"locality: {locality}")
        ax.set_ylabel("net speed-up over baseline (x)")
    axes[0][0].legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "speedup.png"), dpi=110)

    fig, ax = plt.subplots(figsize=(6, 3.5))
    names = [r["preset"] for r in results]
    ax.bar(names, [r["compile"]["t2_ms"]["median"] for r in results], label="t2 (passes, O2, codegen)")
    ax.bar(names, [r["compile"]["first_injection_ms"] for r in results],
           bottom=[r["compile"]["t2_ms"]["median"] for r in results], label="injection")
    ax.set_ylabel("ms")
    ax.legend()
    plt.setp(ax.get_xticklabels(), rotation=30, ha="right")
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "compile.png"), dpi=110)

    for result in results:
        for trace in result["traces"]:
            if trace["segments"] > 1:
                plot_phased(plt, result["preset"], trace, out_dir)


def plot_phased(plt, preset, trace, out_dir):
    segments = trace["segments"]
    xs = [(i + 0.5) * trace["packets"] / segments for i in range(segments)]
    fig, ax = plt.subplots(figsize=(7, 3.8))
    for v in trace["variants"]:
        ax.plot(xs, v["segment_net_ns"], marker=".", label=v["name"])
    for edge in trace.get("phase_edges", []):
        ax.axvline(edge, color="grey", linestyle="--", linewidth=0.8)
    ax.set_xlabel("packet of the trace (phase changes dashed)")
    ax.set_ylabel("net ns/packet")
    ax.set_title(f"{preset}: {trace.get('phases', 'phased trace')}", fontsize=9)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, f"phases-{preset}.png"), dpi=110)
    if "adaptation" in trace:
        plot_adaptation(plt, preset, trace, out_dir)


def plot_adaptation(plt, preset, trace, out_dir):
    """The loop's speed-up per slice of the phased trace, the slices a new
    version served first marked, phase changes dashed."""
    adaptation = trace["adaptation"]
    slices = adaptation["slices"]
    xs = [(i + 0.5) * trace["packets"] / len(slices) for i in range(len(slices))]
    fig, ax = plt.subplots(figsize=(7, 3.8))
    ax.plot(xs, [s["speedup_net"] for s in slices], marker=".", label="morpheus (loop)")
    installed = [(x, s["speedup_net"]) for x, s in zip(xs, slices) if s["installed"]]
    if installed:
        ax.scatter(*zip(*installed), marker="^", color="red", zorder=3,
                   label="new version installed before the slice")
    for edge in trace.get("phase_edges", []):
        ax.axvline(edge, color="grey", linestyle="--", linewidth=0.8)
    ax.axhline(1.0, color="black", linewidth=0.6)
    ax.set_xlabel(f"packet of the trace (a cycle every {adaptation['period_slices']} slices)")
    ax.set_ylabel("net speed-up over the baseline")
    ax.set_title(f"{preset}: adaptation to {trace.get('phases', 'phased trace')}", fontsize=9)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, f"adaptation-{preset}.png"), dpi=110)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nf", default=DEFAULT_NFS, help=f"presets (default {DEFAULT_NFS})")
    ap.add_argument("--locality", default="none,low,high")
    ap.add_argument("--packets", type=int, default=1 << 20)
    ap.add_argument("--flows", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--method", choices=("driver", "live"), default="driver")
    ap.add_argument("--phases", help="also a time-phased trace per function, e.g. "
                    "uniform/300000,high/300000/A,high/300000/B (plotted per function)")
    ap.add_argument("--adapt-period", type=int, default=0,
                    help="with --phases, also the adaptation experiment: the loop runs a "
                    "cycle every N slices (plotted per function)")
    ap.add_argument("--out", required=True, help="directory for the results")
    ap.add_argument("--morpheus", default=os.path.join(SOURCE, "build", "bin", "morpheus"))
    ap.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    args = ap.parse_args(argv)

    os.makedirs(args.out, exist_ok=True)
    commit = subprocess.run(["git", "-C", SOURCE, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or "unknown"
    meta = {"command": " ".join(["tools/bench/matrix.py"] + (argv if argv is not None
                                                              else sys.argv[1:])),
            "date": utc_now(), "commit": commit,
            "packets": args.packets, "flows": args.flows, "rounds": args.rounds,
            "seed": args.seed, "method": args.method}
    load_at_start = os.getloadavg()[0]
    nfs = [n for n in args.nf.split(",") if n]
    results = []
    for i, nf in enumerate(nfs, 1):
        print(f"matrix: [{i}/{len(nfs)}] {nf}", file=sys.stderr, flush=True)
        results.append(run_one(args.morpheus, nf, args, args.out))
    # One sitting: when it ran and how loaded the machine was, start to end.
    meta["date"] += f" to {utc_now()} UTC"
    meta["load"] = f"{load_at_start:.1f} to {os.getloadavg()[0]:.1f}"
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    with open(os.path.join(args.out, "matrix.md"), "w") as f:
        f.write(markdown(results, meta))
    if not args.no_plots:
        plot(results, args.out)
    print(f"matrix: results in {args.out} (matrix.md, results.json"
          + ("" if args.no_plots else ", speedup.png, compile.png"
             + (", phases-*.png" if args.phases else "")) + ")", file=sys.stderr)


if __name__ == "__main__":
    main()
