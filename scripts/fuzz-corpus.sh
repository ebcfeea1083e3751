#!/usr/bin/env bash
# Differential fuzzing of many programs with `morpheus fuzz`, one after the
# other: per program the cases compared and how many differed, or why it was
# not fuzzed. Exit status 1 when any program differed. Needs root and a build.
#
#   scripts/fuzz-corpus.sh [--seconds N] [--seed S] [PROG ...]
#
# Without PROG: every program of the corpus (examples/, nf/, tests/programs/).
# The long run of docs/equivalence.md: --seconds 300 --seed 30 with the
# example and the five network functions; the corpus run of docs/issues.md:
# --seconds 5. Reproducers go to a private directory (0700), removed at the
# end unless a program differed.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
seconds=3 seed=1
morpheus=$repo/build/bin/morpheus
while [[ $# -gt 0 && $1 == --* ]]; do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
programs=("$@")
[[ ${#programs[@]} -eq 0 ]] &&
  programs=("$repo"/examples/*.bpf.c "$repo"/nf/*/*.bpf.c "$repo"/tests/programs/*.bpf.c)
work=$(mktemp -d /tmp/morpheus-fuzz-corpus-XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "commit $(git -C "$repo" rev-parse --short HEAD) start $(date -u +%FT%TZ)" \
     "seconds $seconds seed $seed"
differed=0 fuzzed=0 cases=0
for program in "${programs[@]}"; do
  [[ $program == /* ]] || program=$repo/$program
  name=${program#"$repo"/}
  # What the corpus tests build these with (tests/kernel/DifferentialTest.cpp).
  case $(basename "$program") in
    arith_signed.bpf.c | sdiv_bound.bpf.c | srem_bound.bpf.c) extra=(--cflags -mcpu=v4) ;;
    build_core_vmlinux.bpf.c) extra=(-I "$repo/build/generated/vmlinux") ;;
    build_legacy_section.bpf.c) extra=(--prog-type xdp) ;;
    build_glibc_header.bpf.c) extra=(-D __x86_64__) ;;
    *) extra=() ;;
  esac
  output=$(nice -n 10 "$morpheus" fuzz "$program" --seconds "$seconds" --seed "$seed" \
             "${extra[@]}" --reproducer "$work/$(basename "$program" .bpf.c).json" 2>&1)
  status=$?
  summary=$(grep -m1 'cases compared' <<<"$output")
  if [[ -n $summary ]]; then
    fuzzed=$((fuzzed + 1))
    cases=$((cases + $(grep -o '[0-9]* cases compared' <<<"$summary" | cut -d' ' -f1)))
    [[ $status -ne 0 ]] && differed=$((differed + 1))
    echo "$name: $(grep -m1 'map states in' <<<"$output" | sed 's/^fuzz: //'); ${summary#fuzz: }"
  else
    echo "$name: not fuzzed: $(grep -m1 -i 'error' <<<"$output" || head -1 <<<"$output")"
  fi
done
echo "end $(date -u +%FT%TZ): $fuzzed programs fuzzed, $cases cases, $differed with a difference"
if [[ $differed -ne 0 ]]; then
  trap - EXIT
  echo "reproducers (they hold map contents) kept in $work"
  exit 1
fi
