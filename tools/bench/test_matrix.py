"""matrix.py end to end on a tiny run: the real `morpheus bench` (root, kernel),
real traces, the tables and the plots."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch):
    """Morpheus's caches (the cost model's calibration) in this test's own
    directory: nothing an earlier run left is read."""
    monkeypatch.setenv("MORPHEUS_CACHE_DIR", str(tmp_path / "cache"))


def test_tiny_matrix_writes_tables_and_plots(tmp_path):
    out = tmp_path / "results"
    command = [sys.executable, os.path.join(HERE, "matrix.py"), "--nf", "router-20routes,lb",
               "--locality", "none,high", "--packets", "2048", "--flows", "64", "--rounds", "2",
               "--out", str(out)]
    if os.environ.get("MORPHEUS_BIN"):
        command += ["--morpheus", os.environ["MORPHEUS_BIN"]]
    done = subprocess.run(command, capture_output=True, text=True, timeout=840)
    assert done.returncode == 0, done.stderr

    results = json.loads((out / "results.json").read_text())
    assert [r["preset"] for r in results["results"]] == ["router-20routes", "lb"]
    for result in results["results"]:
        assert [t["name"] for t in result["traces"]] == ["none", "high"]
        for trace in result["traces"]:
            assert trace["variants"][0]["name"] == "baseline"
            assert trace["variants"][1]["name"] == "morpheus"
            assert len(trace["variants"][1]["net_ns"]["values"]) == 2
    router = results["results"][0]
    for trace in router["traces"]:
        assert {"oracle-hot10", "oracle-full"} <= {v["name"] for v in trace["variants"]}
    lb = results["results"][1]
    for trace in lb["traces"]:
        skipping = {v["name"]: v["skips_lookups"] for v in trace["variants"]
                    if v["name"].startswith("oracle")}
        assert skipping == {"oracle-hot10-flows": False, "oracle-hot10": True}
    table = (out / "matrix.md").read_text()
    assert table.count("| router-20routes |") == 3  # two localities + compile row

    def cells(prefix):
        rows = [line for line in table.splitlines()
                if line.startswith(f"| {prefix} | none") or line.startswith(f"| {prefix} | high")]
        assert len(rows) == 2, table
        return [[c.strip() for c in row.strip("|").split("|")] for row in rows]
    # Every variant has its cell; the faster of the router's equivalent
    # oracles is noise on a 2-round run, that one is named is not. lb's
    # oracle skipping the LRU is headroom, in a column of its own.
    for row in cells("router-20routes"):
        assert all("x**)" in cell for cell in row[4:7]), row
        assert row[7].startswith("oracle-") and row[8] == "-", row
    for row in cells("lb"):
        assert row[7].startswith("oracle-hot10-flows ") and row[8].startswith("oracle-hot10 "), row
    for png in ("speedup.png", "compile.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The progress reached the caller while it ran.
    assert "matrix: [2/2] lb" in done.stderr


def test_failing_bench_stops_the_matrix(tmp_path):
    done = subprocess.run([sys.executable, os.path.join(HERE, "matrix.py"), "--nf",
                           "no-such-function", "--out", str(tmp_path)] +
                          (["--morpheus", os.environ["MORPHEUS_BIN"]]
                           if os.environ.get("MORPHEUS_BIN") else []),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "no benchmark preset 'no-such-function'" in done.stderr
    assert "`morpheus bench no-such-function` failed" in done.stderr
