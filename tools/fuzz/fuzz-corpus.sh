#!/usr/bin/env bash
# Fuzzes every program of the corpus (examples/, nf/, tests/programs/) with
# `morpheus fuzz` for SECONDS each and prints, per program, the cases
# compared and how many differed, or why it was not fuzzed. Exit status 1
# when any program differed. Needs root.
#
#   tools/fuzz/fuzz-corpus.sh [SECONDS] [MORPHEUS]     (default 3, build/bin/morpheus)
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
seconds=${1:-3}
morpheus=${2:-$repo/build/bin/morpheus}
work=$(mktemp -d /tmp/morpheus-fuzz-corpus-XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "commit $(git -C "$repo" rev-parse --short HEAD) start $(date -u +%FT%TZ) seconds $seconds"
differed=0 fuzzed=0 cases=0
for program in "$repo"/examples/*.bpf.c "$repo"/nf/*/*.bpf.c "$repo"/tests/programs/*.bpf.c; do
  name=${program#"$repo"/}
  output=$("$morpheus" fuzz "$program" --seconds "$seconds" \
             --reproducer "$work/$(basename "$program" .bpf.c).json" 2>&1)
  status=$?
  summary=$(grep -m1 'cases compared' <<<"$output")
  if [[ -n $summary ]]; then
    fuzzed=$((fuzzed + 1))
    cases=$((cases + $(grep -o '[0-9]* cases compared' <<<"$summary" | cut -d' ' -f1)))
    [[ $status -ne 0 ]] && differed=$((differed + 1))
    echo "$name: ${summary#fuzz: }"
  else
    echo "$name: not fuzzed: $(grep -m1 -i 'error' <<<"$output" || head -1 <<<"$output")"
  fi
done
echo "end $(date -u +%FT%TZ): $fuzzed programs fuzzed, $cases cases, $differed with a difference"
[[ $differed -eq 0 ]]
