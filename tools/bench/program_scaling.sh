#!/bin/bash
# How a cycle's cost grows with the number of programs of one object
# (docs/benchmarks.md, "Many programs in one object"): `morpheus run` of
# tests/programs/many_programs.bpf.c built with -DPROGRAMS=N on a scratch
# veth (generic XDP, --no-build-cache: startup builds from the source each
# time). Every program's ACL (rules_K) holds three rules before Morpheus
# starts (the maps are created and filled under the pin directory, which
# `run` reuses), so the first installed cycle specializes the whole
# configuration; then one rule of the last program's ACL changes (`morpheus
# map update`, guarded) and the next installed cycle is the second one
# measured. Prints one JSON line per N: startup and its phases, and per
# installed cycle t1, t2 and its phases, validation and its phases,
# injection and its phases, what validation left out and how many programs
# the version reused from the running one as loaded.
# Usage: program_scaling.sh MORPHEUS_BINARY N... Needs root.
set -e
BIN=$1
shift
WT=$(cd "$(dirname "$0")/../.." && pwd)

measure() {
  local n=$1 last=$(($1 - 1)) k
  local ns=pscale$$n$n pin=/sys/fs/bpf/pscale$$n$n out
  out=$(mktemp -d)
  ip netns add $ns
  ip -n $ns link add veth0 type veth peer name veth1
  ip -n $ns link set veth0 up
  ip -n $ns link set veth1 up
  mkdir -p $pin
  # Rules as `struct rule` bytes: UDP 53 dropped, TCP 22 passed, TCP
  # 8000-8999 sent back.
  for ((k = 0; k < n; k++)); do
    echo "map create $pin/rules_$k type array key 4 value 8 entries 16 name rules_$k"
    echo "map update pinned $pin/rules_$k key 0 0 0 0 value 0x11 0x02 0x35 0 0x35 0 0 0"
    echo "map update pinned $pin/rules_$k key 1 0 0 0 value 0x06 0x03 0x16 0 0x16 0 0 0"
    echo "map update pinned $pin/rules_$k key 2 0 0 0 value 0x06 0x04 0x40 0x1f 0x27 0x23 0 0"
  done > $out/config
  bpftool batch file $out/config > /dev/null
  $BIN run $WT/tests/programs/many_programs.bpf.c -DPROGRAMS=$n --prog many_entry \
    --no-build-cache --iface veth1 --netns $ns --xdp-mode generic --pin-dir $pin \
    --socket $out/sock --period 1s --log-format json > $out/run.log 2>&1 &
  local mpid=$!
  installed() { cat $out/run.log 2>/dev/null | grep -c '"outcome":"installed"' || true; }
  local ok=1
  until [ "$(installed)" -ge 1 ]; do sleep 1; kill -0 $mpid 2>/dev/null || { ok=0; break; }; done
  if [ $ok = 1 ]; then
    # The last program's third rule: TCP 8000-8999 sent back becomes 8000-8099.
    $BIN map update $pin/rules_$last 02000000 0604401fa31f0000 > /dev/null
    until [ "$(installed)" -ge 2 ]; do sleep 1; kill -0 $mpid 2>/dev/null || { ok=0; break; }; done
  fi
  kill -INT $mpid 2>/dev/null || true
  wait $mpid 2>/dev/null || true
  [ $ok = 1 ] || { echo "program_scaling: N=$n: morpheus run ended early:" >&2; tail -20 $out/run.log >&2; }
  python3 - "$n" "$(cut -d' ' -f1 /proc/loadavg)" $out/run.log <<'EOF'
import json, sys
n, load, path = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
result = {"programs": n, "load": load, "cycles": []}
for line in open(path):
    try:
        record = json.loads(line)
    except ValueError:
        continue
    fields = record.get("fields", record)
    event = record.get("event")
    if event == "attached":
        result["startup_ms"] = fields["startup_ms"]
    elif event == "startup":
        result["startup_phases"] = fields["phases"]
    elif event == "cycle" and fields.get("outcome") == "installed":
        result["cycles"].append({key: fields.get(key) for key in (
            "cycle", "t1_ms", "t2_ms", "t2_phases", "validation_ms", "validation_phases",
            "injection_ms", "injection_phases", "instructions")} |
            {"validation_skipped": len(fields.get("validation_skipped", [])),
             "reused": len(fields.get("reused_programs", []))})
print(json.dumps(result))
EOF
  ip netns del $ns
  rm -rf $pin $out
}

for n in "$@"; do
  measure $n
done
