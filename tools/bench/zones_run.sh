# Sourced by the composite_zones benches (validation_scope.sh,
# idle_cost.sh). start_zones_run BINARY NAME: `morpheus run` of
# tests/programs/composite_zones.bpf.c on a scratch veth in namespace
# NAME$$ (generic XDP, --period 1s, its JSON log in $OUT/run.log, its pins
# in $PIN), the bench preset's 12 zones of 3 rules written through Morpheus
# once its maps are pinned, until its first version is installed. Sets
# MPID; on exit the run is stopped and the namespace, pins and $OUT go.
WT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
installed() { grep -c '"outcome":"installed"' $OUT/run.log || true; }
start_zones_run() {
  local bin=$1
  NS=$2$$
  PIN=/sys/fs/bpf/$2$$
  OUT=$(mktemp -d)
  ip netns add $NS
  ip -n $NS link add veth0 type veth peer name veth1
  ip -n $NS link set veth0 up; ip -n $NS link set veth1 up
  trap 'kill -INT $MPID 2>/dev/null; wait $MPID 2>/dev/null; ip netns del $NS; rm -rf $PIN $OUT' EXIT
  $bin run $WT/tests/programs/composite_zones.bpf.c --prog zones_entry --iface veth1 --netns $NS \
    --xdp-mode generic --pin-dir $PIN --period 1s --log-format json > $OUT/run.log 2>&1 &
  MPID=$!
  until [ -e $PIN/acl_11 ]; do sleep 1; kill -0 $MPID; done
  # The preset's writes (tests/programs/bench/composite_zones.conf), by pin.
  grep '^update ' $WT/tests/programs/bench/composite_zones.conf | sed 's/#.*//' |
    while read -r _ map _ rest; do
      key=$(echo "$rest" | sed 's/ value .*//' | tr -d ' ')
      value=$(echo "$rest" | sed 's/.* value //' | tr -d ' ')
      $bin map update $PIN/$map $key $value > /dev/null
    done
  until [ "$(installed)" -ge 1 ]; do sleep 1; kill -0 $MPID; done
}
