#!/bin/bash
# What a cycle after a change in one zone costs on composite_zones
# (docs/benchmarks.md, "composite_zones: validating only what changed"): `morpheus run` on a
# scratch veth (generic XDP) with the bench preset's 12 zones of 3 rules;
# after the first install, one rule of zone 3 changes (`morpheus map
# update`, guarded), and the cycle that follows is the one measured.
# Prints one JSON line per installed cycle (cycle, t2, validation and
# injection ms, validation phases, what validation left out).
# Usage: validation_scope.sh MORPHEUS_BINARY [LABEL]. Needs root.
set -e
BIN=$1
LABEL=${2:-$BIN}
WT=$(cd "$(dirname "$0")/../.." && pwd)
NS=vscope$$
PIN=/sys/fs/bpf/vscope$$
OUT=$(mktemp -d)
ip netns add $NS
ip -n $NS link add veth0 type veth peer name veth1
ip -n $NS link set veth0 up; ip -n $NS link set veth1 up
cleanup() { kill -INT $MPID 2>/dev/null; wait $MPID 2>/dev/null; ip netns del $NS; rm -rf $PIN $OUT; }
trap cleanup EXIT
$BIN run $WT/tests/programs/composite_zones.bpf.c --prog zones_entry --iface veth1 --netns $NS \
  --xdp-mode generic --pin-dir $PIN --period 1s --log-format json > $OUT/run.log 2>&1 &
MPID=$!
installed() { grep -c '"outcome":"installed"' $OUT/run.log || true; }
until [ -e $PIN/acl_11 ]; do sleep 1; kill -0 $MPID; done
# The preset's writes (tests/programs/bench/composite_zones.conf), by pin.
grep '^update ' $WT/tests/programs/bench/composite_zones.conf | sed 's/#.*//' |
  while read -r _ map _ rest; do
    key=$(echo "$rest" | sed 's/ value .*//' | tr -d ' ')
    value=$(echo "$rest" | sed 's/.* value //' | tr -d ' ')
    $BIN map update $PIN/$map $key $value > /dev/null
  done
until [ "$(installed)" -ge 1 ]; do sleep 1; kill -0 $MPID; done
# Zone 3's third rule: TCP 8000-8999 sent back becomes 8000-8099.
$BIN map update $PIN/acl_3 02000000 0604401fa31f00000000000000000000 > /dev/null
until [ "$(installed)" -ge 2 ]; do sleep 1; kill -0 $MPID; done
grep '"outcome":"installed"' $OUT/run.log | python3 -c '
import json, sys
for line in sys.stdin:
    record = json.loads(line)
    fields = record.get("fields", record)
    print(json.dumps({"label": sys.argv[1], "cycle": fields["cycle"], "t2_ms": fields["t2_ms"],
                      "validation_ms": fields["validation_ms"],
                      "injection_ms": fields["injection_ms"],
                      "validation_skipped": len(fields.get("validation_skipped", [])),
                      "validation_phases": fields.get("validation_phases"),
                      "reused": len(fields.get("reused_programs", [])),
                      "t2_phases": fields.get("t2_phases")}))
' "$LABEL"
