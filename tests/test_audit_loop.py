"""``compatcheck audit --every``: the continuous audit against the fake API server. A pool's driver labels change
and the next audit starts within the node poll, not at the next period; the metrics say the last complete audit's
findings per namespace, rule and severity, and drop the series of findings that disappeared."""

from __future__ import annotations

import re
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from compatcheck.cli.entry import main
from tests.fake_apiserver import FakeApiServer
from tests.test_audit import audit_server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    srv = audit_server()
    yield srv
    srv.stop()


def _metrics(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(compatcheck_audit_\w+(?:\{[^}]*\})?) (\S+)$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def _wait(cond, timeout: float, what: str):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            found = cond()
        except OSError:  # the metrics port is not open yet
            found = None
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"{what} not reached within {timeout} s")


def test_a_driver_change_is_audited_within_the_node_poll(server: FakeApiServer, tmp_path: Path) -> None:
    port = _free_port()
    codes: list[int] = []
    argv = ["audit", "--kubeconfig", server.kubeconfig(str(tmp_path / "kc")), "--every", "3600", "--node-poll",
            "0.2", "--metrics-port", str(port), "--max-runs", "2", "--format", "json", "-o", str(tmp_path / "a.json")]
    thread = threading.Thread(target=lambda: codes.append(main(argv)), daemon=True)
    thread.start()
    first = _wait(lambda: (m := _metrics(port)).get("compatcheck_audit_last_complete_timestamp_seconds") and m,
                  30, "the first audit")
    assert {k: v for k, v in first.items() if k.startswith(("compatcheck_audit_findings{",
                                                            "compatcheck_audit_pods_affected{"))} == {
        'compatcheck_audit_findings{namespace="ml",rule="cuda-driver-too-old",severity="error"}': 2.0,
        'compatcheck_audit_findings{namespace="ml",rule="cuda-driver-needs-forward-compat",severity="warning"}': 1.0,
        'compatcheck_audit_findings{namespace="research",rule="cuda-driver-too-old",severity="error"}': 1.0,
        'compatcheck_audit_pods_affected{namespace="ml",rule="cuda-driver-too-old"}': 2.0,
        'compatcheck_audit_pods_affected{namespace="ml",rule="cuda-driver-needs-forward-compat"}': 3.0,
        'compatcheck_audit_pods_affected{namespace="research",rule="cuda-driver-too-old"}': 1.0}
    assert first['compatcheck_audit_runs_total{result="ok"}'] == 1.0
    # GFD's timestamp label changes on every node each minute: no rule reads it, no audit starts.
    for node in server.objects("", "nodes"):
        node["metadata"]["labels"]["nvidia.com/gfd.timestamp"] = "1764240000"
    time.sleep(1.0)
    assert thread.is_alive() and _metrics(port)['compatcheck_audit_runs_total{result="ok"}'] == 1.0
    changed = time.monotonic()
    for node in server.objects("", "nodes"):
        labels = node["metadata"]["labels"]
        if labels.get("pool") == "t4":
            labels.update({"nvidia.com/cuda.driver-version.full": "580.65.06",
                           "nvidia.com/cuda.driver-version.major": "580",
                           "nvidia.com/cuda.runtime-version.major": "13",
                           "nvidia.com/cuda.runtime-version.minor": "0"})
    thread.join(30)
    assert not thread.is_alive() and codes == [0]
    assert time.monotonic() - changed < 15  # within the poll and one audit, not the 3600 s period
    after = _metrics(port)
    assert {k: v for k, v in after.items() if k.startswith("compatcheck_audit_findings{")} == {
        'compatcheck_audit_findings{namespace="research",rule="cuda-driver-major-skew",severity="warning"}': 1.0}
    assert after["compatcheck_audit_node_changes_total"] == 1.0
    assert after['compatcheck_audit_runs_total{result="ok"}'] == 2.0
    assert (tmp_path / "a.json").read_text().count('"rule"') == 1  # -o is rewritten by each audit


def test_an_unreachable_api_server_is_counted_not_fatal(tmp_path: Path) -> None:
    dead = FakeApiServer()
    dead.port = 1
    port = _free_port()
    code = main(["audit", "--kubeconfig", dead.kubeconfig(str(tmp_path / "kc")), "--every", "0.1", "--node-poll",
                 "0.05", "--metrics-port", str(port), "--max-runs", "2"])
    assert code == 2
    assert _metrics(port)['compatcheck_audit_runs_total{result="error"}'] == 2.0


def test_a_change_is_audited_once_the_nodes_have_settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pool relabelled node by node: the next audit waits for one poll that sees the same Nodes as the one
    before, so it judges the new state, not the pool half-way (the e2e test relabels two nodes one after the
    other, and the loop's second audit caught the first alone)."""
    from compatcheck.webhook import audit_loop

    seen = iter(["a", "a", "b", "c", "c", "c"])  # audit 1 sees a; a poll sees a; b (changed); c; c (settled)
    calls: list[str] = []

    def fingerprint(api: object, page: int) -> str:
        calls.append(value := next(seen))
        return value

    audits: list[int] = []

    def audit_once() -> tuple[object, int]:
        audits.append(len(calls))
        return object(), 0

    class Metrics:
        class _Counter:
            def inc(self) -> None:
                pass

            def labels(self, *_: str) -> Metrics._Counter:
                return self
        node_changes = runs = _Counter()

        def publish(self, audit: object, seconds: float) -> None:
            pass

    monkeypatch.setattr(audit_loop, "node_fingerprint", fingerprint)
    code = audit_loop.run_loop(None, audit_once, every=3600, node_poll=0, page=500, metrics=Metrics(),  # type: ignore[arg-type]
                               max_runs=2)
    # The second audit starts after the fifth listing (c twice), and lists once more itself.
    assert (code, audits, calls) == (0, [1, 6], ["a", "a", "b", "c", "c", "c"])


def test_a_rollout_that_never_pauses_is_still_audited(monkeypatch: pytest.MonkeyPatch) -> None:
    from compatcheck.webhook import audit_loop

    count = iter(range(1000))
    monkeypatch.setattr(audit_loop, "node_fingerprint", lambda api, page: str(next(count)))
    audits: list[int] = []

    class Metrics:
        class _Counter:
            def inc(self) -> None:
                pass
        node_changes = _Counter()

        def publish(self, audit: object, seconds: float) -> None:
            pass

    def audit_once() -> tuple[object, int]:
        audits.append(1)
        return object(), 0

    audit_loop.run_loop(None, audit_once, every=3600, node_poll=0, page=500, metrics=Metrics(),  # type: ignore[arg-type]
                        max_runs=2)
    # listing 0 (audit 1), 1 (a change), then SETTLE_POLLS listings that all differ, then the audit's own listing
    assert (len(audits), next(count)) == (2, 3 + audit_loop.SETTLE_POLLS)
