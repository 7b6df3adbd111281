"""The webhook's HTTP surface under hostile bodies (issue #24), in-process through aiohttp's test client: every
well-formed AdmissionReview envelope is answered with its uid, every malformed body gets a 4xx, never a 5xx, and
/healthz is fine afterwards; a review that overruns its budget is answered per the failure mode while /healthz and
other callers go on."""

from __future__ import annotations

import json
import random
import time
from typing import Any

import pytest

from compatcheck.core.admission import AdmissionSettings, ReviewError, parse_request
from compatcheck.io.loader import Loaded
from compatcheck.webhook import app as app_module
from compatcheck.webhook.app import State, make_app
from compatcheck.webhook.clusterview import StaticView
from compatcheck.webhook.metrics import Metrics
from tests.conftest import ROOT, SHARED
from tests.test_fuzz_hostile import mutate_object, mutate_text

pytestmark = pytest.mark.asyncio
ADMISSION = sorted((SHARED / "fixtures" / "admission").glob("*.json")) if (SHARED / "fixtures").is_dir() else []
HOSTILE: list[bytes] = [
    b"[" * 100_000 + b"]" * 100_000, b'{"request": ' * 5000, b'{"kind": "AdmissionReview", "request": {"uid": '
    + b"9" * 5000 + b"}}", b"\xff\xfe", b"", b"null", b"[]", b'"x"', b"1e999999", b'{"request": {"uid": "u"}}',
    b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": []}',
]


def _state(loaded: Loaded) -> State:
    return State(loaded.ruleset, AdmissionSettings(), StaticView(loaded.kb, None, []), Metrics())


def _well_formed(raw: bytes) -> str | None:
    """The uid an envelope must be answered with, or None when the webhook may refuse the body (4xx)."""
    try:
        body = json.loads(raw)
        return str(parse_request(body).uid)
    except (ValueError, RecursionError, ReviewError, TypeError, AttributeError):
        return None


@pytest.mark.skipif(not ADMISSION, reason="../shared/fixtures/admission is absent")
async def test_hostile_bodies_never_get_a_5xx(aiohttp_client: Any, loaded: Loaded) -> None:
    client = await aiohttp_client(make_app(_state(loaded)))
    rng = random.Random(24)
    bodies: list[bytes] = list(HOSTILE)
    for path in ADMISSION:
        review = json.loads(path.read_text())
        for _ in range(40):
            mutated = json.loads(json.dumps(review))
            if isinstance(mutated.get("request"), dict) and isinstance(mutated["request"].get("object"), dict):
                mutated["request"]["object"] = mutate_object(mutated["request"]["object"], rng)
            try:
                bodies.append(json.dumps(mutated, default=str).encode())
            except (ValueError, RecursionError):
                continue
        for _ in range(10):
            bodies.append(mutate_text(path.read_text(), rng).encode("utf-8", "surrogatepass"))
    answered = refused = 0
    for raw in bodies:
        endpoint = rng.choice(["/validate", "/mutate"])
        started = time.perf_counter()
        resp = await client.post(endpoint, data=raw, headers={"Content-Type": "application/json"})
        text = await resp.text()
        assert resp.status < 500, (resp.status, text[:300], raw[:300])
        assert time.perf_counter() - started < 10
        uid = _well_formed(raw)
        if uid is not None and resp.status == 200:
            assert json.loads(text)["response"]["uid"] == uid
            answered += 1
        else:
            assert 400 <= resp.status < 500 or uid is not None, (resp.status, text[:300])
            refused += 1
    assert answered > len(ADMISSION) * 20 and refused >= len(HOSTILE) - 1
    health = await client.get("/healthz")
    assert health.status == 200 and await health.text() == "ok\n"


@pytest.mark.skipif(not ADMISSION, reason="../shared/fixtures/admission is absent")
async def test_an_overrunning_review_is_answered_per_the_failure_mode(aiohttp_client: Any, loaded: Loaded,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    real = app_module.review

    def stuck(*args: Any, **kwargs: Any) -> Any:  # one check that never looks at the deadline
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            pass
        return real(*args, **kwargs)

    monkeypatch.setattr(app_module, "review", stuck)
    state = _state(loaded)
    state.review_timeout = 0.2
    client = await aiohttp_client(make_app(state))
    raw = ADMISSION[0].read_bytes()
    uid = json.loads(raw)["request"]["uid"]
    import asyncio

    admission = asyncio.ensure_future(client.post("/validate", data=raw))
    await asyncio.sleep(0.05)
    started = time.perf_counter()
    health = await client.get("/healthz")
    assert health.status == 200 and time.perf_counter() - started < 0.5  # not behind the stuck review
    resp = await admission
    body = await resp.json()
    assert resp.status == 200 and body["response"]["uid"] == uid and body["response"]["allowed"] is True
    assert body["response"]["warnings"] == ["compatcheck: not evaluated (the review took more than 0.2 s)"]


async def test_a_cached_review_is_answered_on_the_event_loop(aiohttp_client: Any, loaded: Loaded,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A replica of an object already evaluated is answered without the review thread (``review_cached``), with the
    answer the thread would give; a body past INLINE_MAX_BODY always goes to the thread."""
    real, threads = app_module.review, []

    def counted(*args: Any, **kwargs: Any) -> Any:
        import threading

        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(app_module, "review", counted)
    view = StaticView(loaded.kb, str(ROOT / "examples" / "cluster-profile.yaml"), [])
    client = await aiohttp_client(make_app(State(loaded.ruleset, AdmissionSettings(), view, Metrics())))

    def replica(i: int, padding: int = 0) -> bytes:
        obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"p-{i}", "namespace": "d", "uid": f"pod-{i}", "annotations": {"pad": "x" * padding}},
            "spec": {"nodeSelector": {"nvidia.com/gpu.product": "Tesla-T4"}, "containers": [{
                "name": "c", "image": "vllm/vllm-openai:v0.9.2", "args": ["--dtype=bfloat16"],
                "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
        return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": f"u-{i}", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "operation": "CREATE",
            "namespace": "d", "object": obj, "dryRun": False}}).encode()

    answers = []
    for i in range(3):
        resp = await client.post("/validate", data=replica(i))
        assert resp.status == 200
        answers.append((await resp.json())["response"])
    assert threads == ["compatcheck-review_0"]  # the first only: the other two were cache hits
    assert [a["uid"] for a in answers] == ["u-0", "u-1", "u-2"]
    for i, a in enumerate(answers):  # the thread's answer and the loop's are the same, for each object's name
        assert a["allowed"] is False and a["status"]["message"].startswith(f"compatcheck denied Pod d/p-{i}:\n")
        assert a["status"]["message"].split("\n")[1:] == answers[0]["status"]["message"].split("\n")[1:]
        assert "- dtype-unsupported-by-gpu: --dtype bfloat16 needs compute capability >= 8.0" in a["status"]["message"]
    big = replica(3, app_module.INLINE_MAX_BODY)
    for _ in range(2):  # the same big object twice: a cache hit, but answered from the thread both times
        resp = await client.post("/validate", data=big)
        assert resp.status == 200 and (await resp.json())["response"]["uid"] == "u-3"
    assert threads == ["compatcheck-review_0"] * 3
