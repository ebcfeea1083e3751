#!/bin/bash
# The user-space router over AF_XDP (docs/benchmarks.md): a veth pair
# between two scratch namespaces; morpheus-trafficgen sends live frames
# (BPF_PROG_RUN, XDP_TX) out of the peer without pause, K flows to
# 10.0.0.1 + k; `morpheus user-run --af-xdp` in the other namespace
# receives them through the net_af_xdp PMD's socket (copy mode: veths
# have no zero-copy) and times the generic and the specialized router in
# interleaved rounds. One interface is port 0: MU_TX packets to it go back
# out of the veth, to other bound ports (PORTS, default 1) are freed: with
# PORTS=4 only the flows whose routes the neighbours file puts on port 0
# are sent, which shows what sending costs. Needs root and a build in
# build/.
#   [PORTS=N] tools/bench/user_afxdp.sh ROUTES FLOWS [user-run options...]
set -eu
WT=$(cd "$(dirname "$0")/../.." && pwd)
ROUTES=${1:-$WT/nf/router/configs/stanford-yozb-routes-500.txt}
FLOWS=${2:-1000}
shift 2 || true
NS=muafxdp$$
OUT=$(mktemp -d)
INJECTOR=
cleanup() {
  if [ -n "$INJECTOR" ]; then # the loop first, then the morpheus-trafficgen it runs
    local running
    running=$(pgrep -P "$INJECTOR" || true)
    kill "$INJECTOR" 2>/dev/null || true
    [ -n "$running" ] && kill $running 2>/dev/null || true
    wait "$INJECTOR" 2>/dev/null || true
  fi
  ip netns del $NS-a 2>/dev/null || true
  ip netns del $NS-b 2>/dev/null || true
  rm -rf "$OUT"
}
trap cleanup EXIT
for side in a b; do
  ip netns add $NS-$side
  ip netns exec $NS-$side sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
done
ip -n $NS-a link add mu$$a type veth peer name mu$$b netns $NS-b
ip -n $NS-a link set mu$$a up
ip -n $NS-b link set mu$$b up
MAC=$(ip -n $NS-a -br link show mu$$a | awk '{print $3}')
# The trace only serves user-run's check of generic against specialized
# and its ring rounds; what the sockets receive is the injector's.
python3 "$WT/tools/traces/gen_trace.py" --nf router --config "$ROUTES" --flows "$FLOWS" \
  --packets 100000 -o "$OUT/trace.pcap" -q
# The injector: one syscall sends 50M frames (~5 s at 10 Mpps), again and
# again until the run ends; frames are dropped until the PMD attaches its
# XDP program.
( while :; do
    "$WT/build/bin/morpheus-trafficgen" --netns $NS-b --iface mu$$b --dst-mac "$MAC" \
      --packets 50000000 --flows "$FLOWS" --daddr-base 10.0.0.1 >/dev/null
  done ) &
INJECTOR=$!
ip netns exec $NS-a "$WT/build/bin/morpheus" user-run --routes "$ROUTES" \
  --neighbors "$WT/nf/router/configs/stanford-neighbors.txt" --trace "$OUT/trace.pcap" \
  --ports "${PORTS:-1}" --af-xdp mu$$a "$@" 2>&1 | grep -v "^libbpf: elf: skipping\|^libxdp: Falling back"
