#!/usr/bin/env python3
"""Generates firewall rule sets that look like ClassBench's, of any size.

Deterministic: the same seed files, --count, --seed and --drop-percent give
the same output, byte for byte (Python's random.Random is stable across
versions for the calls used here).

Each rule is modelled on a rule drawn at random from the seed files, which
keeps the joint mix of the real sets: protocol, which fields are present,
prefix lengths, and port ranges (exact well-known ports, 1024:65535,
traceroute's 33434:33600, ...). What changes:
  - addresses: a prefix already in use with that length is reused with the
    probability the seed field shows (few distinct prefixes serve many rules
    in real sets); otherwise a new prefix branches off one in use, sharing
    its leading bits, as ClassBench's address trees do;
  - exact ports: redrawn from the seed's exact-port distribution half of the
    time, so new rules do not just clone the seeds;
  - order: rules keep their model's relative position, so specific rules
    come first and broad ones last, as in the seeds; the all-wildcard rule
    is left out (placed anywhere it would hide every rule after it);
  - action: ACCEPT (the seeds have nothing else), or DROP for
    --drop-percent of the rules.

usage: gen_rules.py --count N [--seed S] [--drop-percent P] [SEED_FILE ...]
"""
import argparse
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SEEDS = [
    os.path.join(HERE, "..", "configs", "classbench-fw1-449-rules.txt"),
    os.path.join(HERE, "..", "configs", "classbench-fw3-411-rules.txt"),
]
FIELDS = ["src", "dst", "l4proto", "sport", "dport"]


def parse_prefix(text):
    address, _, length = text.partition("/")
    parts = [int(p) for p in address.split(".")]
    value = (parts[0] << 24) | (parts[1] << 16) | (parts[2] << 8) | parts[3]
    return value, int(length) if length else 32


def format_prefix(value, length):
    address = ".".join(str((value >> shift) & 0xFF) for shift in (24, 16, 8, 0))
    return address if length == 32 else "%s/%d" % (address, length)


def mask(length):
    return (0xFFFFFFFF << (32 - length)) & 0xFFFFFFFF if length else 0


def read_seeds(paths):
    rules = []
    for path in paths:
        with open(path) as f:
            lines = [l.split("#")[0].split() for l in f]
        lines = [l for l in lines if l]
        for index, words in enumerate(lines):
            rule = dict(w.split("=", 1) for w in words)
            rule["position"] = index / len(lines)
            rules.append(rule)
    return rules


class AddressPool:
    """The prefixes of one field (src or dst) in use, by length."""

    def __init__(self, seeds, field, rng):
        self.rng = rng
        prefixes = [parse_prefix(r[field]) for r in seeds if field in r]
        self.reuse = 1 - len(set(prefixes)) / len(prefixes) if prefixes else 0
        self.by_length = {}
        self.all = []
        for prefix in sorted(set(prefixes)):
            self.add(prefix)

    def add(self, prefix):
        if prefix not in self.by_length.setdefault(prefix[1], []):
            self.by_length[prefix[1]].append(prefix)
            self.all.append(prefix)

    def draw(self, length):
        same = self.by_length.get(length, [])
        if same and self.rng.random() < self.reuse:
            return self.rng.choice(same)
        parent, parent_length = self.rng.choice(self.all)
        shared = self.rng.randint(min(8, length), max(min(8, length), min(parent_length, length)))
        fresh = self.rng.getrandbits(32)
        value = ((parent & mask(shared)) | (fresh & ~mask(shared) & 0xFFFFFFFF)) & mask(length)
        self.add((value, length))
        return value, length


def generate(seeds, count, seed, drop_percent):
    rng = random.Random(seed)
    models = [r for r in seeds if any(f in r for f in FIELDS)]
    pools = {f: AddressPool(seeds, f, rng) for f in ("src", "dst")}
    exact_ports = {
        f: [r[f] for r in seeds if f in r and r[f].split(":")[0] == r[f].split(":")[1]]
        for f in ("sport", "dport")
    }
    rules = []
    for _ in range(count):
        model = rng.choice(models)
        rule = {}
        for field in ("src", "dst"):
            if field in model:
                rule[field] = format_prefix(*pools[field].draw(parse_prefix(model[field])[1]))
        if "l4proto" in model:
            rule["l4proto"] = model["l4proto"]
        for field in ("sport", "dport"):
            if field in model:
                low, high = model[field].split(":")
                exact = low == high
                rule[field] = (rng.choice(exact_ports[field])
                               if exact and rng.random() < 0.5 else model[field])
        rule["action"] = "DROP" if rng.random() * 100 < drop_percent else "ACCEPT"
        rules.append((model["position"] + rng.random() * 0.02, rule))
    rules.sort(key=lambda pair: pair[0])
    return [" ".join("%s=%s" % (f, r[f]) for f in FIELDS + ["action"] if f in r)
            for _, r in rules]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("seeds", nargs="*", default=DEFAULT_SEEDS,
                        help="ClassBench rule files to model (default: fw1 and fw3)")
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--drop-percent", type=float, default=0)
    args = parser.parse_args()
    rules = generate(read_seeds(args.seeds), args.count, args.seed, args.drop_percent)
    seeds = " ".join(os.path.basename(s) for s in args.seeds)
    print("# %d rules generated by nf/firewall/tools/gen_rules.py --count %d --seed %d "
          "--drop-percent %g from %s" % (args.count, args.count, args.seed,
                                         args.drop_percent, seeds))
    print("\n".join(rules))


if __name__ == "__main__":
    sys.exit(main())
