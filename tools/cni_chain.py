#!/usr/bin/env python3
"""The journal paper's CNI chain, on one machine: namespaces as pods and nodes.

Two "nodes" (network namespaces joined by a veth) each run tools/cni/chain.bpf.c
(firewall -> service load balancer -> router, plain libbpf XDP loaded with
bpftool) on the node side of every pod's veth and on the inter-node link;
pods are namespaces behind them. The maps get what a cluster of realistic
size pushes: hundreds of services and endpoints, policy rules, routes.

  check   pod-to-pod (one node, across nodes) and pod-to-service connect
          through the chain, a denied flow is dropped; with and without
          Morpheus (`morpheus daemon` adopting every hook), same results.
  bench   interleaved rounds, plain chain vs Morpheus: sockperf ping-pong
          latency and iperf3 throughput for the three paths; JSON out.

Everything it creates carries a unique prefix and is removed on exit, even
on failure.
"""
import argparse
import ipaddress
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "cni", "chain.bpf.c")

# Addresses: node A's pods in 10.244.1.0/24, node B's in 10.244.2.0/24.
PODS = {  # pod -> (node, address)
    "a1": ("a", "10.244.1.10"),
    "a2": ("a", "10.244.1.11"),
    "b1": ("b", "10.244.2.10"),
}
GATEWAY = {"a": "10.244.1.1", "b": "10.244.2.1"}
VIP = "10.96.0.10"
SOCKPERF_PORT, IPERF_PORT, ECHO_PORT = 11111, 5201, 7000
# The measured services: VIP port -> (endpoint pod, endpoint port).
SERVICES = {80: ("b1", SOCKPERF_PORT), 8080: ("b1", IPERF_PORT), 7: ("b1", ECHO_PORT)}
PATHS = {  # name -> (client pod, destination address, port offset: service or not)
    "pod-pod same node": ("a1", PODS["a2"][1], False),
    "pod-pod across nodes": ("a1", PODS["b1"][1], False),
    "pod-service": ("a1", VIP, True),
}
POLICY_ALLOW, POLICY_DENY = 1, 2


def run(cmd, check=True, **kw):
    return subprocess.run(cmd, check=check, capture_output=True, text=True, **kw)


def mac(node, index):
    return "02:c0:%02x:00:%02x:%02x" % (ord(node), index >> 8, index & 0xff)


def mac_bytes(text):
    return bytes(int(x, 16) for x in text.split(":"))


def ip_bytes(text):
    return ipaddress.IPv4Address(text).packed


def hexs(data):
    return " ".join("%02x" % b for b in data)


class Cluster:
    """The namespaces, veths and pinned programs of one run."""

    def __init__(self, morpheus, services, rules, seed, period):
        self.id = "%04x" % random.randrange(0x10000)
        self.prefix = "cn" + self.id
        self.morpheus = morpheus
        self.n_services, self.n_rules, self.seed, self.period = services, rules, seed, period
        self.netns = []
        self.pins = []
        self.procs = []
        self.daemon = None
        self.tmp = tempfile.mkdtemp(prefix="cni-chain-")
        self.hooks = []  # (node namespace, interface) running the chain
        self.config_counts = {}

    # -- names -----------------------------------------------------------
    def ns(self, name):
        return "%s-%s" % (self.prefix, name)

    def nsexec(self, name, cmd):
        # nsenter, not `ip netns exec`: the latter remounts /sys and hides bpffs.
        return ["nsenter", "--net=/run/netns/" + self.ns(name)] + cmd

    # -- setup -----------------------------------------------------------
    def setup(self):
        obj = os.path.join(self.tmp, "chain.o")
        run(["clang-19", "-O2", "-g", "-target", "bpf", "-I/usr/include/x86_64-linux-gnu",
             "-c", SOURCE, "-o", obj])
        for name in ["a", "b"] + list(PODS):
            run(["ip", "netns", "add", self.ns(name)])
            self.netns.append(self.ns(name))
            run(self.nsexec(name, ["ip", "link", "set", "lo", "up"]))
        ifindex = {}
        # Pods: eth0 inside the pod, <prefix>-<pod> on the node.
        for i, (pod, (node, addr)) in enumerate(PODS.items()):
            host = "%s-%s" % (self.prefix, pod)
            run(["ip", "link", "add", host, "address", mac(node, 0x100 + i), "netns", self.ns(node),
                 "type", "veth", "peer", "name", host + "p", "address", mac(node, 0x200 + i),
                 "netns", self.ns(pod)])
            run(self.nsexec(pod, ["ip", "link", "set", host + "p", "name", "eth0"]))
            run(self.nsexec(pod, ["ip", "addr", "add", addr + "/32", "dev", "eth0"]))
            run(self.nsexec(pod, ["ip", "link", "set", "eth0", "up"]))
            run(self.nsexec(pod, ["ip", "route", "add", GATEWAY[node], "dev", "eth0"]))
            run(self.nsexec(pod, ["ip", "route", "add", "default", "via", GATEWAY[node]]))
            run(self.nsexec(pod, ["ip", "neigh", "add", GATEWAY[node], "lladdr",
                                  mac(node, 0x100 + i), "dev", "eth0", "nud", "permanent"]))
            # Frames an XDP program rewrote carry no checksum offload state:
            # the pod computes its checksums itself.
            run(self.nsexec(pod, ["ethtool", "-K", "eth0", "tx", "off"]))
            run(self.nsexec(node, ["ip", "link", "set", host, "up"]))
            self.hooks.append((node, host))
        # The link between the nodes.
        la, lb = self.prefix + "-la", self.prefix + "-lb"
        run(["ip", "link", "add", la, "address", mac("a", 1), "netns", self.ns("a"), "type", "veth",
             "peer", "name", lb, "address", mac("b", 1), "netns", self.ns("b")])
        run(self.nsexec("a", ["ip", "link", "set", la, "up"]))
        run(self.nsexec("b", ["ip", "link", "set", lb, "up"]))
        self.hooks += [("a", la), ("b", lb)]
        for node, dev in self.hooks:
            ifindex[dev] = json.loads(run(self.nsexec(node, ["ip", "-j", "link", "show", dev])).stdout)[0]["ifindex"]
        # Load one chain per node (its own maps, as one agent per node would),
        # attach it to every hook of the node, and XDP_PASS inside the pods.
        for node in ["a", "b"]:
            pin = "/sys/fs/bpf/%s-%s" % (self.prefix, node)
            run(["bpftool", "prog", "loadall", obj, pin, "pinmaps", pin + "/maps"])
            self.pins.append(pin)
            for hook_node, dev in self.hooks:
                if hook_node == node:
                    run(self.nsexec(node, ["bpftool", "net", "attach", "xdp", "pinned", pin + "/cni_chain", "dev", dev]))
        for pod in PODS:
            run(self.nsexec(pod, ["bpftool", "net", "attach", "xdp", "pinned",
                                  "/sys/fs/bpf/%s-a/cni_pass" % self.prefix, "dev", "eth0"]))
        self.configure(ifindex)

    def configure(self, ifindex):
        """What a cluster's control plane pushes to each node."""
        rng = random.Random(self.seed)
        la, lb = self.prefix + "-la", self.prefix + "-lb"
        for node in ["a", "b"]:
            maps = "/sys/fs/bpf/%s-%s/maps/" % (self.prefix, node)
            cmds = []

            def update(m, key, value):
                cmds.append("map update pinned %s%s key hex %s value hex %s" % (maps, m, hexs(key), hexs(value)))

            link, peer = (la, mac("b", 1)) if node == "a" else (lb, mac("a", 1))
            own = mac(node, 1)
            # Routes: this node's pods, every other node's pod CIDR over the link.
            for i, (pod, (pnode, addr)) in enumerate(PODS.items()):
                if pnode == node:
                    dev = "%s-%s" % (self.prefix, pod)
                    update("routes", struct.pack("<I", 32) + ip_bytes(addr),
                           struct.pack("<I", ifindex[dev]) + mac_bytes(mac(node, 0x100 + i)) + mac_bytes(mac(node, 0x200 + i)))
            for third in range(1, 255):
                if third != {"a": 1, "b": 2}[node]:
                    update("routes", struct.pack("<I", 24) + bytes([10, 244, third, 0]),
                           struct.pack("<I", ifindex[link]) + mac_bytes(own) + mac_bytes(peer))
            # Services: the measured ones, and many more with endpoints all over the cluster.
            endpoints = []
            svcs = []
            for vport, (pod, eport) in SERVICES.items():
                svcs.append((ip_bytes(VIP), vport, 6, len(endpoints), 1))
                endpoints.append((ip_bytes(PODS[pod][1]), eport))
            for s in range(self.n_services):
                n = rng.randint(1, 5)
                svcs.append((bytes([10, 96, 1 + s // 250, s % 250 + 1]), rng.choice([80, 443, 8080, 53]),
                             rng.choice([6, 17]), len(endpoints), n))
                for _ in range(n):
                    endpoints.append((bytes([10, 244, rng.randint(3, 254), rng.randint(2, 250)]),
                                      rng.choice([8080, 8443, 9000, 5353])))
            for vip, port, proto, first, count in svcs:
                update("services", vip + struct.pack("!H", port) + bytes([proto, 0]), struct.pack("<II", count, first))
            for index, (addr, port) in enumerate(endpoints):
                update("endpoints", struct.pack("<I", index), addr + struct.pack("!HH", port, 0))
            # Policy: the measured pods take traffic from the cluster's pods,
            # except a2 -> b1 (denied: the check's dropped flow); many rules
            # for the other pods of the cluster.
            for pod, (_, addr) in PODS.items():
                update("policy", struct.pack("<I", 32 + 16) + ip_bytes(addr) + bytes([10, 244, 0, 0]),
                       bytes([POLICY_ALLOW, 0, 0, 0]))
            update("policy", struct.pack("<I", 64) + ip_bytes(PODS["b1"][1]) + ip_bytes(PODS["a2"][1]),
                   bytes([POLICY_DENY, 0, 0, 0]))
            for r in range(self.n_rules):
                dst = bytes([10, 244, rng.randint(3, 254), rng.randint(2, 250)])
                plen = rng.choice([8, 16, 24, 32])
                src = int.from_bytes(bytes([10, 244, rng.randint(0, 254), rng.randint(0, 254)]), "big")
                src &= (0xffffffff << (32 - plen)) & 0xffffffff
                update("policy", struct.pack("<I", 32 + plen) + dst + src.to_bytes(4, "big"),
                       bytes([POLICY_ALLOW, rng.choice([0, 6, 17]), 0, 0]) if rng.random() < 0.5 else
                       bytes([POLICY_ALLOW, 6]) + struct.pack("!H", rng.choice([80, 443, 8080])))
            batch = os.path.join(self.tmp, "config-%s.txt" % node)
            with open(batch, "w") as f:
                f.write("\n".join(cmds) + "\n")
            run(["bpftool", "batch", "file", batch])
            self.config_counts = {"services": len(svcs), "endpoints": len(endpoints),
                                  "policy_rules": self.n_rules + len(PODS) + 1,
                                  "routes": sum(1 for c in cmds if "/routes " in c)}

    # -- Morpheus ----------------------------------------------------------
    def start_morpheus(self, timeout=600):
        """`morpheus daemon` adopting every hook; returns once each is specialized."""
        config = os.path.join(self.tmp, "agent.yaml")
        lines = ["socket: %s/agent.sock" % self.tmp, "programs:"]
        names = []
        for node, dev in self.hooks:
            name = dev
            names.append(name)
            lines += ["  - name: %s" % name, "    source: %s" % SOURCE, "    entry: cni_chain",
                      "    adopt: %s" % dev, "    netns: %s" % self.ns(node), "    pin_dir: %s/pins/%s" % ("/sys/fs/bpf", name),
                      "    period: %s" % self.period, "    includes: [/usr/include/x86_64-linux-gnu]"]
        with open(config, "w") as f:
            f.write("\n".join(lines) + "\n")
        log = open(os.path.join(self.tmp, "agent.log"), "a")
        self.daemon = subprocess.Popen([self.morpheus, "daemon", "--config", config],
                                       stdout=subprocess.PIPE, stderr=log, text=True)
        installed = set()
        deadline = time.time() + timeout
        while installed != set(names):
            line = self.daemon.stdout.readline()
            if not line:
                raise RuntimeError("morpheus daemon exited; see %s" % log.name)
            log.write(line)
            if time.time() > deadline:
                raise RuntimeError("Morpheus did not specialize every hook within %d s" % timeout)
            if re.search(r"cycle \d+: installed", line):
                installed.update(n for n in names if re.search(r"\b%s\b" % re.escape(n), line))
        # Keep draining its output so that it never blocks on a full pipe.
        self.drain = subprocess.Popen(["cat"], stdin=self.daemon.stdout, stdout=log)

    def stop_morpheus(self):
        if self.daemon:
            self.daemon.terminate()
            try:
                self.daemon.wait(60)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.daemon.wait()
            self.drain.wait()
            self.daemon = None

    # -- servers and clients -------------------------------------------------
    def serve(self, pod, cmd):
        p = subprocess.Popen(self.nsexec(pod, cmd), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(p)
        return p

    def start_servers(self):
        echo = ("import socket\ns=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
                "s.bind(('0.0.0.0',%d));s.listen(16)\nwhile True:\n c,a=s.accept();d=c.recv(64)\n"
                " c.sendall(('%%s:%%d|%%s:%%d|'%%(c.getsockname()+a)).encode()+d);c.close()\n" % ECHO_PORT)
        for pod in ["a2", "b1"]:
            self.serve(pod, ["sockperf", "server", "--tcp", "-i", "0.0.0.0", "-p", str(SOCKPERF_PORT)])
            self.serve(pod, ["iperf3", "-s", "-p", str(IPERF_PORT)])
            self.serve(pod, ["python3", "-c", echo])
        time.sleep(1)

    def connect(self, client, addr, port, timeout=2):
        """One TCP exchange with the echo server: what it saw, or None if no answer."""
        code = ("import socket,sys\ns=socket.create_connection(('%s',%d),timeout=%g)\n"
                "s.sendall(b'hi');print(s.recv(256).decode())\n" % (addr, port, timeout))
        r = run(self.nsexec(client, ["python3", "-c", code]), check=False)
        return r.stdout.strip() if r.returncode == 0 else None

    def checks(self):
        """The deliveries and verdicts the chain must give, whoever runs it:
        what the server saw (its address, the client's; not the client's
        ephemeral port), None where nothing answered."""
        strip = lambda seen: seen and re.sub(r":\d+\|hi$", "", seen)
        return {k: strip(v) for k, v in {
            "pod-pod same node": self.connect("a1", PODS["a2"][1], ECHO_PORT),
            "pod-pod across nodes": self.connect("a1", PODS["b1"][1], ECHO_PORT),
            "pod-service": self.connect("a1", VIP, 7),
            "denied a2 -> b1": self.connect("a2", PODS["b1"][1], ECHO_PORT),
        }.items()}

    def sockperf(self, path, seconds):
        client, addr, service = PATHS[path]
        port = 80 if service else SOCKPERF_PORT
        r = run(self.nsexec(client, ["sockperf", "ping-pong", "--tcp", "-i", addr, "-p", str(port),
                                     "-t", str(seconds), "--pps", "max"]))
        m = re.search(r"percentile 50\.000 =\s+([0-9.]+)", r.stdout)
        if not m:
            raise RuntimeError("sockperf gave no median:\n" + r.stdout + r.stderr)
        return float(m.group(1))

    def iperf3(self, path, seconds):
        client, addr, service = PATHS[path]
        port = 8080 if service else IPERF_PORT
        r = run(self.nsexec(client, ["iperf3", "-c", addr, "-p", str(port), "-t", str(seconds), "-J"]))
        return json.loads(r.stdout)["end"]["sum_received"]["bits_per_second"] / 1e9

    # -- teardown ------------------------------------------------------------
    def teardown(self):
        try:
            self.stop_morpheus()
        except Exception as e:  # go on tearing down
            print("teardown: %s" % e, file=sys.stderr)
        for p in self.procs:
            p.kill()
            p.wait()
        for ns in self.netns:
            run(["ip", "netns", "del", ns], check=False)
        for pin in self.pins + ["/sys/fs/bpf/pins/" + dev for _, dev in self.hooks]:
            shutil.rmtree(pin, ignore_errors=True)
        shutil.rmtree(self.tmp, ignore_errors=True)


def cmd_check(cluster, args):
    cluster.start_servers()
    plain = cluster.checks()
    print("plain chain: %s" % plain, file=sys.stderr, flush=True)
    cluster.start_morpheus()
    specialized = cluster.checks()
    cluster.stop_morpheus()
    result = {"plain": plain, "morpheus": specialized}
    print(json.dumps(result, indent=2))
    ok = plain == specialized and plain["denied a2 -> b1"] is None and all(
        plain[k] for k in ["pod-pod same node", "pod-pod across nodes", "pod-service"])
    return 0 if ok else 1


def cmd_bench(cluster, args):
    cluster.start_servers()
    rounds = []
    for r in range(args.rounds):
        order = ["plain", "morpheus"] if r % 2 == 0 else ["morpheus", "plain"]
        for mode in order:
            if mode == "morpheus":
                cluster.start_morpheus()
                if args.agent_stopped:
                    cluster.daemon.send_signal(signal.SIGSTOP)
            sample = {"round": r, "mode": mode}
            for path in PATHS:
                sample[path] = {"latency_us": cluster.sockperf(path, args.seconds),
                                "throughput_gbps": cluster.iperf3(path, args.seconds)}
            if mode == "morpheus":
                if args.agent_stopped:
                    cluster.daemon.send_signal(signal.SIGCONT)
                cluster.stop_morpheus()
            print(json.dumps(sample), flush=True)
            rounds.append(sample)
    summary = {}
    for path in PATHS:
        row = {}
        for metric in ["latency_us", "throughput_gbps"]:
            for mode in ["plain", "morpheus"]:
                row["%s_%s" % (metric, mode)] = statistics.median(s[path][metric] for s in rounds if s["mode"] == mode)
            row[metric + "_ratio"] = row[metric + "_morpheus"] / row[metric + "_plain"]
        summary[path] = row
    out = {"config": dict(cluster.config_counts, rounds=args.rounds, seconds=args.seconds, period=args.period,
                          agent_stopped=args.agent_stopped),
           "rounds": rounds, "median": summary}
    with open(args.out, "w") as f:
        json.dump(out, f, indent=2)
    print(json.dumps(summary, indent=2))
    return 0


def plot(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    paths = list(results["median"])
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, metric, label in [(axes[0], "latency_us", "TCP ping-pong latency, median (µs)"),
                              (axes[1], "throughput_gbps", "iperf3 throughput, median (Gbit/s)")]:
        x = range(len(paths))
        ax.bar([i - 0.2 for i in x], [results["median"][p][metric + "_plain"] for p in paths], 0.4, label="plain chain")
        ax.bar([i + 0.2 for i in x], [results["median"][p][metric + "_morpheus"] for p in paths], 0.4, label="Morpheus")
        ax.set_xticks(list(x))
        ax.set_xticklabels(paths, fontsize=8)
        ax.set_title(label, fontsize=9)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    # A SIGTERM (timeout, CI) tears down as an exception does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["check", "bench", "plot"])
    ap.add_argument("--morpheus", default=os.environ.get("MORPHEUS_BIN", "build/bin/morpheus"))
    ap.add_argument("--services", type=int, default=500)
    ap.add_argument("--rules", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=36)
    ap.add_argument("--period", default="1s", help="the agent's period for every hook")
    ap.add_argument("--agent-stopped", action="store_true",
                    help="SIGSTOP the agent while a Morpheus round measures: its specialized versions "
                         "serve on, and the agent's own CPU use (which also keeps an idle machine's "
                         "CPUs out of deep sleep) stays out of the numbers")
    ap.add_argument("--out", default="cni-chain.json")
    ap.add_argument("--plot", default="docs/bench/cni-chain.png")
    args = ap.parse_args()
    if args.command == "plot":
        with open(args.out) as f:
            plot(json.load(f), args.plot)
        return 0
    cluster = Cluster(os.path.abspath(args.morpheus), args.services, args.rules, args.seed, args.period)
    try:
        cluster.setup()
        return (cmd_check if args.command == "check" else cmd_bench)(cluster, args)
    finally:
        cluster.teardown()


if __name__ == "__main__":
    sys.exit(main())
