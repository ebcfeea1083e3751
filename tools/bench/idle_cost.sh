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
. "$(dirname "$0")/zones_run.sh"
start_zones_run $BIN idle
sleep 5
ticks() { awk '{print $14 + $15}' /proc/$MPID/stat; }
before=$(ticks)
sleep 20
after=$(ticks)
echo "{\"label\": \"$LABEL\", \"cpu_ms_per_20s\": $(( (after - before) * 1000 / $(getconf CLK_TCK) ))}"
