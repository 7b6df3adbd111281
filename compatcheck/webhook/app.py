"""The aiohttp application: routes, body limits, structured decision logs, metrics.

``make_app`` is a factory (state under typed ``web.AppKey``s); ``compatcheck.core.admission.review`` decides.
Malformed calls get HTTP 4xx with a message (413 too large, 408 body too slow); policy answers are always
HTTP 200 AdmissionReviews. Nothing here decides admission, and nothing here knows about sockets or TLS
(``compatcheck.webhook.server`` does).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal, Protocol

from aiohttp import web

from compatcheck.core.admission import (
    AdmissionSettings,
    CacheMiss,
    Decision,
    EvaluationCache,
    ReviewError,
    review,
    review_cached,
    unanswered,
)
from compatcheck.core.checks.base import EvalContext
from compatcheck.core.engine import DEADLINE
from compatcheck.core.jsonutil import JsonObject, dumps, loads
from compatcheck.core.rules import RuleSet
from compatcheck.core.workloads import known_kind_names
from compatcheck.webhook.clusterview import Snapshot, ViewHealth
from compatcheck.webhook.datarefresh import DataRefresher
from compatcheck.webhook.logs import DecisionLog, log_event
from compatcheck.webhook.metrics import Metrics
from compatcheck.webhook.registry import AdmissionLookups, request_images

MAX_BODY = 3 * 1024 * 1024  # 3 MiB: the API server's own request limit is 3 MiB
BODY_TIMEOUT = 10.0  # seconds from the request head to the end of the body (the API server waits 30 s at most)
log = logging.getLogger("compatcheck.webhook")
decisions = DecisionLog(log)
# Each review runs off the event loop, in one worker thread (the GIL gives no more throughput to more), with a
# deadline: the engine checks it between rules (the answer is then per the failure mode), and the handler stops
# waiting a little after it whatever the worker does, so neither /healthz nor any other caller waits behind a slow
# input. The API server's own default timeout for a webhook call is 10 s; the review's budget is well within it.
REVIEW_TIMEOUT = 2.0
MAX_WAITING_REVIEWS = 256  # reviews queued for the worker; past it, answered per the failure mode at once
# What needs no evaluation (a skipped request, an object the evaluation cache holds: the replicas of one owner) is
# answered on the event loop instead (``review_cached``): handing a review to the thread and its answer back cost
# more CPU than the cached review itself (two futures, a wake-up of the loop through its self-pipe, a GIL handover)
# and added a thread switch to its latency. The digest that finds it is linear in the object, so only bodies up to
# this size are tried there (64 KiB: about 0.2 ms of the loop at most); larger ones always go to the thread.
INLINE_MAX_BODY = 64 * 1024


class View(Protocol):
    """A cluster view: the static one (files) or the live one (the API server)."""

    snapshot: Snapshot

    def health(self) -> ViewHealth: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...


@dataclass
class State:
    ruleset: RuleSet
    settings: AdmissionSettings
    view: View
    metrics: Metrics
    inflight: int = 0  # admission requests being handled (graceful shutdown waits for 0)
    max_staleness: float = 300.0  # seconds a stale view may serve before /readyz fails (0: never)
    cache: EvaluationCache = field(default_factory=EvaluationCache)
    registry: AdmissionLookups | None = None  # image config lookups (registry.lookups), None: the table alone
    review_timeout: float = REVIEW_TIMEOUT  # seconds per review (see REVIEW_TIMEOUT)
    waiting: int = 0  # reviews submitted to the worker and not answered yet
    worker: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="compatcheck-review"))
    data: DataRefresher | None = None  # keeps the knowledge current (data.source), swapping ruleset/settings/cache


STATE = web.AppKey("state", State)
BODY_TIMEOUT_KEY = web.AppKey("body_timeout", float)


def _bad(request: web.Request, status: int, reason: str, message: str) -> web.Response:
    state = request.app[STATE]
    state.metrics.bad_requests.labels(request.path.strip("/") or "-", reason).inc()
    log_event(log, logging.WARNING, "bad admission request", path=request.path, status=status, error=message)
    return web.json_response({"error": message}, status=status)


async def _admit(request: web.Request, endpoint: Literal["validate", "mutate"]) -> web.Response:
    state = request.app[STATE]
    started = time.perf_counter()
    if request.content_length is not None and request.content_length > MAX_BODY:
        return _bad(request, 413, "too-large", f"request body of {request.content_length} bytes is over the "
                                               f"{MAX_BODY} byte limit")
    try:
        # The whole body, bounded by client_max_size (chunked bodies included) and in time: a client that
        # trickles its body must not hold a connection and a handler. The API server sends head and body
        # together, so the body is usually all there already, and then no timer is needed.
        if request.content.is_eof():
            raw = await request.read()
        else:
            raw = await asyncio.wait_for(request.read(), request.app[BODY_TIMEOUT_KEY])
    except asyncio.TimeoutError:
        slow = _bad(request, 408, "timeout", f"request body not received within {request.app[BODY_TIMEOUT_KEY]:g} s")
        slow.force_close()  # the rest of the body may still come: the connection cannot carry another request
        return slow
    except web.HTTPRequestEntityTooLarge:
        return _bad(request, 413, "too-large", f"request body is over the {MAX_BODY} byte limit")
    except Exception as exc:
        return _bad(request, 400, "read", f"cannot read the request body: {exc}")
    try:
        body = loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return _bad(request, 400, "json", f"request body is not JSON: {exc}")
    snapshot = state.view.snapshot
    undecidable = None if snapshot.synced else "the cluster view has not completed its first sync"
    ctx = snapshot.ctx
    if state.registry is not None and undecidable is None:
        images = request_images(body, ctx.kb.kinds)  # the kinds of the rules loaded (an admin's included)
        if images:  # what the images' own configs say, within the budget (the rest warms in the background)
            found = await state.registry.facts_for(images, state.registry.platform(ctx))
            if found:
                ctx = ctx.with_registry(found)
    try:
        try:
            if len(raw) > INLINE_MAX_BODY:
                raise CacheMiss()
            response, decision = review_cached(body, endpoint, state.ruleset, ctx, state.settings, state.cache,
                                               undecidable)
        except CacheMiss:
            response, decision = await _review(state, body, endpoint, ctx, undecidable)
    except ReviewError as exc:
        return _bad(request, 400, "not-admissionreview", str(exc))
    elapsed = time.perf_counter() - started
    result = "error" if decision.internal_error else ("allowed" if decision.allowed else "denied")
    if endpoint == "mutate" and decision.patched_rules:
        result = "patched"
    m = state.metrics
    if undecidable is not None and decision.internal_error:
        m.child(m.unsynced_answers, endpoint).inc()
    # the body is not ours to trust: a label only for the built-in kinds (a closed set)
    kind = decision.kind if decision.kind in known_kind_names() or decision.kind == "ConfigMap" else "other"
    m.child(m.requests, endpoint, decision.operation, kind, result).inc()
    m.child(m.latency, endpoint).observe(elapsed)
    if decision.internal_error:
        m.child(m.errors, endpoint).inc()
    for f in decision.findings:
        m.child(m.findings, f.rule_id, f.severity.value, endpoint).inc()
    decisions.info("admission", **decision.log_fields(), durationMs=round(elapsed * 1000, 3))
    return web.Response(body=dumps(response), content_type="application/json")


async def _review(state: State, body: object, endpoint: str, ctx: EvalContext,
                  undecidable: str | None) -> tuple[JsonObject, Decision]:
    """``review`` in the worker thread, within ``state.review_timeout`` (see REVIEW_TIMEOUT)."""
    budget = state.review_timeout
    if state.waiting >= MAX_WAITING_REVIEWS:
        return unanswered(body, endpoint, state.settings,  # type: ignore[arg-type]
                          f"{state.waiting} reviews are waiting already")

    deadline = time.monotonic() + budget  # from now: time waiting for the worker counts (nobody waits past it)

    def work() -> tuple[JsonObject, Decision]:
        token = DEADLINE.set(deadline)
        try:
            return review(body, endpoint, state.ruleset, ctx,  # type: ignore[arg-type]
                          state.settings, state.cache, undecidable)
        finally:
            DEADLINE.reset(token)

    state.waiting += 1
    try:
        future = asyncio.get_running_loop().run_in_executor(state.worker, work)
        try:
            # A little past the budget: the engine's own check answers first, this only if one check is stuck.
            return await asyncio.wait_for(asyncio.shield(future), budget + 0.5)
        except asyncio.TimeoutError:
            return unanswered(body, endpoint, state.settings,  # type: ignore[arg-type]
                              f"the review took more than {budget:g} s")
    finally:
        state.waiting -= 1


async def _counted(request: web.Request, endpoint: Literal["validate", "mutate"]) -> web.Response:
    # Counted here rather than in a middleware: graceful shutdown only waits for admission requests, and
    # a middleware costs every request a wrapper call.
    state = request.app[STATE]
    state.inflight += 1
    try:
        return await _admit(request, endpoint)
    finally:
        state.inflight -= 1


async def validate(request: web.Request) -> web.Response:
    return await _counted(request, "validate")


async def mutate(request: web.Request) -> web.Response:
    return await _counted(request, "mutate")


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


async def readyz(request: web.Request) -> web.Response:
    """Ready once the view has completed its first sync. A view that cannot follow the API server keeps
    serving its last good state and says since when; past ``max_staleness`` seconds (0: never) the replica
    reports not ready, so that a replica that does follow takes the traffic."""
    state = request.app[STATE]
    snap, health = state.view.snapshot, state.view.health()
    if not health.synced:
        waiting = f" (listing {', '.join(health.waiting_for)})" if health.waiting_for else ""
        return web.Response(status=503, text=f"cluster view not synced yet{waiting}\n")
    view = f"{snap.nodes} nodes in {snap.classes} classes, {snap.crl_valid} CRL keys"
    if snap.nodes_version:
        view += f" (nodes at resourceVersion {snap.nodes_version})"
    if health.stale_since is None:
        return web.Response(text=f"ok: {view}\n")
    stale_for = max(0.0, time.time() - health.stale_since)
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(health.stale_since))
    text = (f"stale since {since} ({stale_for:.0f} s): answering from the last good view of {view}; "
            f"{health.reason}\n")
    if state.max_staleness and stale_for > state.max_staleness:
        return web.Response(status=503, text=f"not ready: {text}")
    return web.Response(text=f"ok, {text}")


async def metrics_handler(request: web.Request) -> web.Response:
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    body = generate_latest(request.app[STATE].metrics.registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def make_app(state: State, *, body_timeout: float = BODY_TIMEOUT) -> web.Application:
    """The HTTPS admission application."""
    # client_max_size bounds what aiohttp buffers for a body (413 past it), whatever the Content-Length says.
    app = web.Application(client_max_size=MAX_BODY)
    app[STATE] = state
    app[BODY_TIMEOUT_KEY] = body_timeout
    app.router.add_post("/validate", validate)
    app.router.add_post("/mutate", mutate)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


def make_metrics_app(state: State) -> web.Application:
    """The plain-HTTP metrics application (separate port: no admission endpoint is ever served in clear)."""
    app = web.Application()
    app[STATE] = state
    app.router.add_get("/metrics", metrics_handler)
    app.router.add_get("/healthz", healthz)
    return app
