"""The deployment files of deploy/, checked offline.

- The Kubernetes manifests against Kubernetes' own schemas, which
  kubernetes-validate carries (kubectl's dry run needs a server), strictly:
  a misspelled field is an error, not a field the API server drops.
- The PodMonitor is a custom resource: its schema is the Prometheus
  Operator's CRD, which nothing installable here carries. It is checked
  against POD_MONITOR_SCHEMA below, the part of that CRD the manifest uses
  (the fields, their types, the required ones), closed like strict mode.
- What no schema says: the manifests agree with each other (the ConfigMap
  the DaemonSet mounts exists, the probes and the PodMonitor name a port
  the container has, the selectors match the pod's labels), and the
  ConfigMap's agent.yaml is one the real agent starts with, serving the
  page the probes ask for.
- The systemd unit through systemd's own parser (systemd-analyze verify).

Each check is also run on a broken copy, which it must refuse.
"""

import copy
import os
import pathlib
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request

import jsonschema
import kubernetes_validate
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

REPO = pathlib.Path(__file__).resolve().parents[2]
KUBERNETES = REPO / "deploy" / "kubernetes"
UNIT = REPO / "deploy" / "systemd" / "morpheus.service"
# The oldest Kubernetes the manifests are written for (DaemonSet maxSurge
# is GA from 1.25) and the newest the validator knows.
VERSIONS = ["1.25", kubernetes_validate.latest_version()]


def documents():
    found = []
    for path in sorted(KUBERNETES.rglob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if document:
                found.append((path.relative_to(REPO), document))
    return found


def one(kind):
    matches = [document for _, document in documents() if document["kind"] == kind]
    assert len(matches) == 1, f"one {kind} in deploy/kubernetes, found {len(matches)}"
    return matches[0]


def agent_container(daemonset):
    (container,) = daemonset["spec"]["template"]["spec"]["containers"]
    return container


CORE = [(path, document) for path, document in documents() if document["kind"] != "PodMonitor"]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("path,document", CORE, ids=[f"{p}:{d['kind']}" for p, d in CORE])
def test_manifest_is_valid_kubernetes(path, document, version):
    kubernetes_validate.validate(document, version, strict=True)


def test_the_manifests_hold_what_a_node_agent_needs():
    kinds = sorted(document["kind"] for _, document in documents())
    assert kinds == ["ConfigMap", "DaemonSet", "Namespace", "PodMonitor"], (
        "RBAC is deliberately absent (the agent never calls the API server): "
        "a new kind here needs its own checks")


def test_strict_validation_refuses_a_misspelled_field():
    daemonset = copy.deepcopy(one("DaemonSet"))
    mount = agent_container(daemonset)["volumeMounts"][1]
    mount["mountPropogation"] = mount.pop("mountPropagation")
    with pytest.raises(kubernetes_validate.ValidationError, match="mountPropogation"):
        kubernetes_validate.validate(daemonset, VERSIONS[-1], strict=True)


# The PodMonitor fields this repository uses, with the types and required
# fields of the Prometheus Operator's CRD (monitoring.coreos.com/v1).
LABEL_SELECTOR = {
    "type": "object",
    "properties": {
        "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
        "matchExpressions": {"type": "array"},
    },
    "additionalProperties": False,
}
POD_MONITOR_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PodMonitor"},
        "metadata": {
            "type": "object",
            "required": ["name", "namespace"],
            "properties": {
                "name": {"type": "string"},
                "namespace": {"type": "string"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            },
            "additionalProperties": False,
        },
        "spec": {
            "type": "object",
            "required": ["selector"],
            "additionalProperties": False,
            "properties": {
                "selector": LABEL_SELECTOR,
                "podMetricsEndpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "port": {"type": "string"},
                            "path": {"type": "string"},
                            "interval": {"type": "string", "pattern": "^(0|(([0-9]+)(y|w|d|h|m|s|ms))+)$"},
                            "relabelings": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "additionalProperties": False,
                                    "properties": {
                                        "sourceLabels": {"type": "array", "items": {
                                            "type": "string",
                                            "pattern": "^[a-zA-Z_][a-zA-Z0-9_]*$"}},
                                        "targetLabel": {"type": "string"},
                                        "action": {"type": "string"},
                                        "regex": {"type": "string"},
                                        "replacement": {"type": "string"},
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}


def test_podmonitor_has_the_operators_structure():
    jsonschema.validate(one("PodMonitor"), POD_MONITOR_SCHEMA)


def test_podmonitor_schema_refuses_a_port_number():
    monitor = copy.deepcopy(one("PodMonitor"))
    monitor["spec"]["podMetricsEndpoints"][0]["port"] = 9464  # the CRD wants the port's name
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(monitor, POD_MONITOR_SCHEMA)


def test_every_object_is_in_the_agents_namespace():
    namespace = one("Namespace")["metadata"]["name"]
    for path, document in documents():
        if document["kind"] != "Namespace":
            assert document["metadata"]["namespace"] == namespace, path
    labels = one("Namespace")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged", (
        "Pod Security Admission refuses the agent's privileged pods otherwise")


def test_daemonset_runs_the_agent_on_the_nodes_data_plane():
    daemonset = one("DaemonSet")
    pod = daemonset["spec"]["template"]["spec"]
    container = agent_container(daemonset)
    assert pod["hostNetwork"] is True
    assert pod["automountServiceAccountToken"] is False, "no API access: no token"
    assert container["securityContext"]["privileged"] is True
    mounts = {mount["mountPath"]: mount for mount in container["volumeMounts"]}
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    bpffs = mounts["/sys/fs/bpf"]
    assert bpffs.get("mountPropagation") == "Bidirectional", (
        "a bpffs the agent mounts must reach the node, or its pins die with the pod")
    assert volumes[bpffs["name"]]["hostPath"]["path"] == "/sys/fs/bpf"
    assert volumes[mounts["/run/morpheus"]["name"]]["hostPath"]["path"] == "/run/morpheus"
    config = volumes[mounts["/etc/morpheus"]["name"]]["configMap"]["name"]
    assert config == one("ConfigMap")["metadata"]["name"]
    assert "agent.yaml" in one("ConfigMap")["data"], "the image's entrypoint reads it"
    update = daemonset["spec"]["updateStrategy"]
    assert update["type"] == "RollingUpdate"
    assert update["rollingUpdate"]["maxSurge"] == 0, (
        "two agents on one node would share its socket and metrics port")
    limits, requests = container["resources"]["limits"], container["resources"]["requests"]
    assert set(limits) == set(requests) == {"cpu", "memory"}


def test_probes_and_podmonitor_reach_the_metrics_the_agent_serves():
    daemonset = one("DaemonSet")
    container = agent_container(daemonset)
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    # The agent binds what --metrics-address says; the port declared must be it.
    address = container["args"][container["args"].index("--metrics-address") + 1]
    assert address.endswith(f":{ports['metrics']}")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/metrics", "port": "metrics"}, probe
    monitor = one("PodMonitor")
    pod_labels = daemonset["spec"]["template"]["metadata"]["labels"]
    for selector in (monitor["spec"]["selector"], daemonset["spec"]["selector"]):
        assert selector["matchLabels"].items() <= pod_labels.items()
    for endpoint in monitor["spec"]["podMetricsEndpoints"]:
        assert endpoint["port"] in ports
        assert endpoint["path"] == "/metrics"


def morpheus():
    binary = os.environ.get("MORPHEUS_BIN")
    assert binary, "MORPHEUS_BIN names the built morpheus (ctest sets it)"
    return os.path.abspath(binary)


def test_configmaps_agent_yaml_starts_the_agent_and_serves_the_probed_page(tmp_path):
    (tmp_path / "agent.yaml").write_text(one("ConfigMap")["data"]["agent.yaml"])
    container = agent_container(one("DaemonSet"))
    # The DaemonSet's command line, with a loopback address for the node's
    # and a socket of the test's.
    args = [morpheus(), "daemon", "--config", str(tmp_path / "agent.yaml")]
    args += [arg.replace("$(NODE_IP):9464", "127.0.0.1:0") for arg in container["args"]]
    args += ["--socket", str(tmp_path / "agent.sock")]
    log = open(tmp_path / "agent.log", "w+")
    agent = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = None
        deadline = time.monotonic() + 30
        while url is None and time.monotonic() < deadline and agent.poll() is None:
            time.sleep(0.1)
            found = re.search(r"metrics at (http://\S+/metrics)", (tmp_path / "agent.log").read_text())
            url = found and found.group(1)
        assert url, (tmp_path / "agent.log").read_text()
        with urllib.request.urlopen(url, timeout=5) as answer:
            assert answer.status == 200
            families = {family.name for family in text_string_to_metric_families(answer.read().decode())}
        # An idle agent's page: the series that does not depend on programs.
        assert "morpheus_bpf_stats_enabled" in families, families
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(30) == 0, (tmp_path / "agent.log").read_text()
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()


def verify_unit(text, directory):
    """systemd-analyze verify's complaints about a unit of this text, run
    with the built morpheus in place of the installed one."""
    unit = pathlib.Path(directory) / "morpheus.service"
    unit.write_text(text.replace("/usr/local/bin/morpheus ", morpheus() + " "))
    result = subprocess.run(["systemd-analyze", "verify", str(unit)],
                            capture_output=True, text=True, timeout=60)
    return (result.returncode, (result.stdout + result.stderr).strip())


def test_systemd_unit_verifies(tmp_path):
    text = UNIT.read_text()
    assert verify_unit(text, tmp_path) == (0, "")
    service = dict(line.split("=", 1) for line in text.splitlines()
                   if "=" in line and not line.startswith("#"))
    assert service["KillMode"] == "mixed"
    assert service["ExecReload"] == "/bin/kill -HUP $MAINPID"
    assert service["RuntimeDirectory"] == "morpheus"


def test_systemd_verify_catches_a_bad_directive(tmp_path):
    text = UNIT.read_text().replace("KillMode=mixed", "KillMode=mixd")
    code, complaints = verify_unit(text, tmp_path)
    assert "kill mode" in complaints.lower(), complaints
