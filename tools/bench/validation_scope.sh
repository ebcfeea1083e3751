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
. "$(dirname "$0")/zones_run.sh"
start_zones_run $BIN vscope
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
