"""Locality models: turn a set of F flows into a sequence of flow indices.

Models (exact definitions, also in README.md):
  uniform        every packet's flow is drawn i.i.d. uniformly from the set.
  zipf:S         every packet's flow is drawn i.i.d.; the flow of rank k (k = 1..F, the
                 set's order) has probability k^-S / sum_j j^-S.
  pareto:A:B     bursts: pick a flow uniformly, emit it L times in a row, repeat.
                 L = 1 + floor(B * BURST_SCALE * (X - 1)), X ~ Pareto(shape A, scale 1)
                 (X = U^(-1/A), U uniform in (0,1]), BURST_SCALE = 1000; L is cut at the
                 packets left in the phase. B = 0 gives L = 1 (no temporal locality).
  none = pareto:1:0, low = pareto:1:0.0001, high = pareto:1:1
"""
from __future__ import annotations

import bisect
import itertools
import math
import random
from dataclasses import dataclass

BURST_SCALE = 1000
NAMED = {"none": (1.0, 0.0), "low": (1.0, 0.0001), "high": (1.0, 1.0)}


@dataclass
class Model:
    kind: str                   # uniform | zipf | pareto
    a: float = 0.0              # zipf s, or pareto shape alpha
    b: float = 0.0              # pareto beta
    text: str = ""


@dataclass
class Phase:
    model: Model
    packets: int | None         # None: share of what is left
    subset: str = "all"


def parse_model(text):
    t = text.strip().lower()
    parts = t.split(":")
    try:
        if t in NAMED:
            return Model("pareto", *NAMED[t], text=t)
        if t == "uniform":
            return Model("uniform", text=t)
        if parts[0] == "zipf" and len(parts) == 2:
            s = float(parts[1])
            if s >= 0:
                return Model("zipf", s, text=t)
        if parts[0] == "pareto" and len(parts) == 3:
            a, b = float(parts[1]), float(parts[2])
            if a > 0 and b >= 0:
                return Model("pareto", a, b, text=t)
    except ValueError:
        pass
    raise ValueError(f"bad locality model '{text}' (none, low, high, uniform, zipf:S, "
                     f"pareto:ALPHA:BETA)")


def parse_phases(text):
    """'MODEL[/PACKETS[/SET]],...' e.g. 'uniform/50000,high/25000/A,high/25000/B'."""
    phases = []
    for item in text.split(","):
        if not item.strip():
            raise ValueError(f"empty phase in '{text}'")
        fields = item.strip().split("/")
        if len(fields) > 3:
            raise ValueError(f"bad phase '{item}': expected MODEL[/PACKETS[/SET]]")
        model = parse_model(fields[0])
        packets = None
        if len(fields) > 1 and fields[1] not in ("", "*"):
            if not fields[1].isdigit() or int(fields[1]) == 0:
                raise ValueError(f"bad phase '{item}': PACKETS must be a positive integer")
            packets = int(fields[1])
        subset = fields[2] if len(fields) > 2 and fields[2] else "all"
        phases.append(Phase(model, packets, subset))
    return phases


def subsets(nflows, phases):
    """Named subsets: the distinct names other than 'all', sorted, split the flow indices
    0..F-1 into that many disjoint contiguous slices of (almost) equal size."""
    names = sorted({p.subset for p in phases} - {"all"})
    out = {"all": range(nflows)}
    k = len(names)
    for i, name in enumerate(names):
        out[name] = range(i * nflows // k, (i + 1) * nflows // k)
        if not out[name]:
            raise ValueError(f"flow subset '{name}' is empty: too few flows for {k} subsets")
    return out


def phase_lengths(total, phases):
    fixed = sum(p.packets for p in phases if p.packets)
    free = [p for p in phases if not p.packets]
    if not free:                # every phase is sized: their sum is the trace length
        return [p.packets for p in phases]
    if fixed > total:
        raise ValueError(f"phases need {fixed} packets, more than --packets {total}")
    left = total - fixed
    out, k = [], 0
    for p in phases:
        if p.packets:
            out.append(p.packets)
        else:
            out.append(left // len(free) + (1 if k < left % len(free) else 0))
            k += 1
    return out


def _model_indices(model, pool, count, rng):
    n = len(pool)
    if model.kind == "uniform":
        return [pool[i] for i in (rng.randrange(n) for _ in range(count))]
    if model.kind == "zipf":
        cum = list(itertools.accumulate(1.0 / (k ** model.a) for k in range(1, n + 1)))
        return rng.choices(pool, cum_weights=cum, k=count)
    out = []
    scale = model.b * BURST_SCALE
    while len(out) < count:
        f = pool[rng.randrange(n)]
        if scale > 0:
            x = rng.paretovariate(model.a)
            length = 1 + int(min(scale * (x - 1), 1e12))
        else:
            length = 1
        out.extend([f] * min(length, count - len(out)))
    return out


def generate(nflows, packets, phases, seed, progress=None):
    """Flow index per packet (list of ints in 0..nflows-1)."""
    rng = random.Random(seed)
    sets = subsets(nflows, phases)
    lengths = phase_lengths(packets, phases)
    out = []
    for phase, length in zip(phases, lengths):
        pool = sets[phase.subset]
        done = 0
        while done < length:        # in chunks so large traces can report progress
            chunk = min(length - done, 1 << 20)
            out.extend(_model_indices(phase.model, pool, chunk, rng))
            done += chunk
            if progress:
                progress(len(out))
    return out
