#!/bin/bash
# The long differential run recorded in docs/equivalence.md: 5 minutes per
# program, seed 30. Needs root and a build (make setup). About 31 minutes.
cd "$(dirname "$0")/.."
echo "commit $(git rev-parse --short HEAD) start $(date -u +%FT%TZ)"
for p in examples/policy_fwd.bpf.c nf/router/router.bpf.c nf/l2switch/l2switch.bpf.c nf/firewall/firewall.bpf.c nf/nat/nat.bpf.c nf/lb/lb.bpf.c; do
  echo "== $p"
  /usr/bin/time -f "wall %e s" nice -n 10 build/bin/morpheus fuzz $p --seconds 300 --seed 30 --reproducer /tmp/repro-$(basename $p .bpf.c).json 2>&1 | tail -4
done
echo "end $(date -u +%FT%TZ)"
