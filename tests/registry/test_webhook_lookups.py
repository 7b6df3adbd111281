"""The webhook reading image configs at admission, as a real ``compatcheck webhook serve`` process against a real
registry: a slow registry never holds a review past the budget (the review answers from the table, and a later
review has the facts the first one's fetch brought back), the allowlist keeps a pod spec from making the webhook
connect anywhere else (a listening socket records that no connection came), and the metrics count it all."""

from __future__ import annotations

import http.client
import json
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, admission_review
from tests.registry.conftest import NODES, R560, TOO_OLD_13, Images
from tests.registry.harness import Listener, SlowRelay, free_port

DELAY = 0.6  # seconds the slow relay waits before each connection goes through: longer than the budget


@dataclass
class Webhook:
    proc: subprocess.Popen[bytes]
    port: int
    metrics_port: int
    ca: Path
    log: Path

    def review(self, obj: dict[str, Any]) -> tuple[dict[str, Any], float]:
        ctx = ssl.create_default_context(cafile=str(self.ca))
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=ctx, timeout=10)
        body = json.dumps(admission_review(obj)).encode()
        started = time.monotonic()
        conn.request("POST", "/validate", body=body, headers={"Content-Type": "application/json"})
        data = json.loads(conn.getresponse().read())
        return data["response"], time.monotonic() - started

    def metric(self, name: str, labels: str = "") -> float:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
            text = r.read().decode()
        want = (f"{name}{{{labels}}} ",) if labels else (f"{name} ", f"{name}{{")  # no labels: every series
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(want))

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)


def serve(tmp: Path, images: Images, *args: str, config: dict[str, Any]) -> Webhook:
    certs = tmp / "certs"
    subprocess.run([sys.executable, "-m", "compatcheck", "cert", "generate", "--out-dir", str(certs), "--dns",
                    "127.0.0.1"], check=True, capture_output=True, cwd=ROOT)
    nodes = tmp / "nodes.yaml"
    nodes.write_text(NODES.replace("ARCH", "amd64").replace("DRIVER", R560))
    cfg = tmp / "config.yaml"
    cfg.write_text(json.dumps({"apiVersion": "compatcheck/v1", "registry": config}))
    port, mport = free_port(), free_port()
    log = tmp / "webhook.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "compatcheck", "webhook", "serve", "--cert-file", str(certs / "tls.crt"), "--key-file",
         str(certs / "tls.key"), "--host", "127.0.0.1", "--port", str(port), "--metrics-port", str(mport),
         "--nodes", str(nodes), "--config", str(cfg), "--registry-ca", str(images.registry.ca.ca_file),
         "--registry-auth-file", str(images.docker_config / "config.json"), *args],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log.open("w"))
    wh = Webhook(proc, port, mport, certs / "ca.crt", log)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"webhook exited: {log.read_text()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{mport}/healthz", timeout=1):
                return wh
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError("webhook did not start")


def gpu_pod(image: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "serve", "namespace": "ml"}, "spec": {
        "containers": [{"name": "main", "image": image, "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


@pytest.fixture
def relay(basic: Images) -> Iterator[SlowRelay]:
    r = SlowRelay(basic.registry.port, DELAY)
    yield r
    r.close()


def test_a_slow_registry_never_holds_admission_and_the_next_review_has_the_facts(
        tmp_path: Path, basic: Images, relay: SlowRelay) -> None:
    # The registry behind the relay answers as itself (same certificate, same credentials), only late.
    docker = tmp_path / "docker"
    docker.mkdir()
    auth = json.loads((basic.docker_config / "config.json").read_text())["auths"][basic.registry.host]
    (docker / "config.json").write_text(json.dumps({"auths": {relay.host: auth}}))
    wh = serve(tmp_path, basic, "--registry-auth-file", str(docker / "config.json"), "--registry-budget", "0.15",
               config={"lookups": True, "allow": [relay.host]})
    try:
        image = f"{relay.host}/ml/serving:2025-10-14"
        first, took = wh.review(gpu_pod(image))
        assert first["allowed"] is True and took < 0.15 + 0.35, took  # the budget, and HTTPS on a shared machine
        assert "warnings" not in first  # cuda-runtime-unknown is info: the table alone knows nothing of it
        again, took = wh.review(gpu_pod(image))  # the fetch is still under way, past the budget: no wait at all
        assert again["allowed"] is True and took < 0.1, took
        deadline = time.monotonic() + 15
        while wh.metric("compatcheck_registry_fetches_total", 'outcome="ok"') < 1:
            assert time.monotonic() < deadline, wh.log.read_text()
            time.sleep(0.05)
        second, took = wh.review(gpu_pod(image))
        assert second["allowed"] is False and took < 0.5
        line = "- cuda-driver-too-old: " + TOO_OLD_13.format(image=image, digest=basic.serving.digest[:19])
        assert second["status"]["message"] == f"compatcheck denied Pod ml/serve:\n{line[:199]}…"  # lines cut at 200
        assert wh.metric("compatcheck_registry_lookups_total", 'result="miss"') == 2  # one fetch for both
        assert wh.metric("compatcheck_registry_lookups_total", 'result="hit"') == 1
        assert wh.metric("compatcheck_registry_wait_seconds_count") == 1  # only the first miss waited
        assert wh.metric("compatcheck_registry_fetches_total", 'outcome="ok"') == 1
    finally:
        wh.stop()


def test_a_registry_off_the_allowlist_gets_no_connection(tmp_path: Path, basic: Images) -> None:
    rec = Listener("record")
    wh = serve(tmp_path, basic, config={"lookups": True})  # the default allowlist: public registries only
    try:
        image = f"{rec.host}/internal/secret:1"
        response, _took = wh.review(gpu_pod(image))
        time.sleep(0.3)  # a fetch, had one started, would have connected by now
        assert response["allowed"] is True
        assert rec.connections == 0
        assert wh.metric("compatcheck_registry_lookups_total", 'result="not-allowed"') == 1
        assert wh.metric("compatcheck_registry_fetches_total") == 0
    finally:
        wh.stop()
        rec.close()


def test_a_failing_registry_is_remembered_not_hammered(tmp_path: Path, basic: Images) -> None:
    image = basic.ref("ml/serving:no-such-tag")
    wh = serve(tmp_path, basic, "--registry-allow", basic.registry.host, config={"lookups": True})
    try:
        for _ in range(3):
            response, _took = wh.review(gpu_pod(image))
            assert response["allowed"] is True
            time.sleep(0.3)
        assert wh.metric("compatcheck_registry_fetches_total", 'outcome="not-found"') == 1
        assert wh.metric("compatcheck_registry_lookups_total", 'result="failed-recently"') == 2
        logged = [json.loads(line) for line in wh.log.read_text().splitlines() if "registry lookup failed" in line]
        assert [(e["image"], e["reason"]) for e in logged] == [(image, "not-found")]
    finally:
        wh.stop()
