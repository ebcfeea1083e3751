#!/bin/bash
# What a running Morpheus costs while nothing changes (docs/benchmarks.md,
# "composite_zones: building only what changed"): `morpheus run` of
# composite_zones on a scratch veth (generic XDP, --period 1s) with the
# bench preset's 12 zones of 3 rules; once the first version is installed
# and 5 s have passed, the process's CPU time (user + system, from
# /proc/PID/stat) over the next 20 s, in which every period reads the
# tables and finds them unchanged.
# Usage: idle_cost.sh MORPHEUS_BINARY [LABEL]. Needs root.
set -e
BIN=$1
LABEL=${2:-$BIN}
WT=$(cd "$(dirname "$0")/../.." && pwd)
NS=idle$$
PIN=/sys/fs/bpf/idle$$
OUT=$(mktemp -d)
ip netns add $NS
ip -n $NS link add veth0 type veth peer name veth1
ip -n $NS link set veth0 up; ip -n $NS link set veth1 up
cleanup() { kill -INT $MPID 2>/dev/null; wait $MPID 2>/dev/null; ip netns del $NS; rm -rf $PIN $OUT; }
trap cleanup EXIT
$BIN run $WT/tests/programs/composite_zones.bpf.c --prog zones_entry --iface veth1 --netns $NS \
  --xdp-mode generic --pin-dir $PIN --period 1s --log-format json > $OUT/run.log 2>&1 &
MPID=$!
until [ -e $PIN/acl_11 ]; do sleep 1; kill -0 $MPID; done
grep '^update ' $WT/tests/programs/bench/composite_zones.conf | sed 's/#.*//' |
  while read -r _ map _ rest; do
    key=$(echo "$rest" | sed 's/ value .*//' | tr -d ' ')
    value=$(echo "$rest" | sed 's/.* value //' | tr -d ' ')
    $BIN map update $PIN/$map $key $value > /dev/null
  done
until grep -q '"outcome":"installed"' $OUT/run.log; do sleep 1; kill -0 $MPID; done
sleep 5
ticks() { awk '{print $14 + $15}' /proc/$MPID/stat; }
before=$(ticks)
sleep 20
after=$(ticks)
echo "{\"label\": \"$LABEL\", \"cpu_ms_per_20s\": $(( (after - before) * 1000 / $(getconf CLK_TCK) ))}"
