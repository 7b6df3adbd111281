"""Registry lookups at admission: image configs for the evaluation, within a budget, never blocking admission.

``AdmissionLookups.facts_for`` is awaited by the admission handler before it evaluates. It answers at once from
its memory for what it knows, starts a fetch for what it does not (on a small thread pool running the lint's own
client, ``compatcheck.io.oci``), and waits for those fetches at most ``budget`` seconds (150 ms by default); what is
not back by then is answered from what else is known (the image table, as without lookups) and lands in memory
for the next review of that image. A fetch is never started twice for one image at once.

Only registries on the allowlist are ever contacted (default: the common public ones; ``registry.allow``): a
pod spec is untrusted input, and an image reference naming ``10.0.0.1:8080/x`` must not make the webhook open a
connection there (SSRF). Token realms and redirects go only to allowlisted hosts and ``registry.redirectHosts``
(the public registries' CDNs and auth services by default), and credentials only to the registry they belong to:
``registry.authFile``, where the chart mounts the one pull Secret it names.

Memory: a bounded LRU of images (``registry.cacheEntries``); tag answers expire after ``registry.tagTtlSeconds``,
digest answers never do (a digest's content cannot change), failures after ``NEGATIVE_TTL`` seconds (so a registry
that is down is asked again a minute later, not on every admission request), each failure logged once per TTL.
Metrics: lookups by result (hit, miss, failed-recently, not-allowed), fetches by outcome, fetch and wait latency.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, replace

from compatcheck.core.checks.base import EvalContext, lookup_images
from compatcheck.core.config import RegistrySettings
from compatcheck.core.imageconfig import RegistryFacts
from compatcheck.core.images import ImageRef, canonical, parse_reference
from compatcheck.core.jsonutil import Json
from compatcheck.core.workloads import KindTable
from compatcheck.io.dockerauth import Credentials
from compatcheck.io.imagefacts import choose_platform, make_client
from compatcheck.io.oci import FetchError, HostPolicy, RegistryClient
from compatcheck.webhook.logs import log_event
from compatcheck.webhook.metrics import Metrics

log = logging.getLogger("compatcheck.webhook")
NEGATIVE_TTL = 60.0  # seconds a failed lookup is remembered (and not retried)
FETCH_DEADLINE = 10.0  # seconds one background fetch may take, whatever the admission budget
MAX_IMAGES_PER_REQUEST = 32  # a pod spec may name many images; past these, the table alone speaks


@dataclass
class _Entry:
    facts: RegistryFacts | None
    error: FetchError | None
    expires: float  # monotonic; inf for a digest's facts


def request_images(body: Json, kinds: KindTable | None = None) -> list[str]:
    """The images whose config could decide a CUDA runtime in an AdmissionReview's object (and old object)."""
    req = body.get("request") if isinstance(body, dict) else None
    if not isinstance(req, dict):
        return []
    out: dict[str, None] = {}
    for key in ("object", "oldObject"):
        obj = req.get(key)
        if isinstance(obj, dict):
            for image in lookup_images(obj, kinds):
                out.setdefault(image, None)
    return list(out)[:MAX_IMAGES_PER_REQUEST]


class AdmissionLookups:
    def __init__(self, settings: RegistrySettings, metrics: Metrics, *, client: RegistryClient | None = None) -> None:
        self.settings = settings
        self.metrics = metrics
        self.policy = HostPolicy(settings.allowed(True), settings.redirect_hosts)
        self.client = client or make_client(settings, webhook=True, credentials=Credentials(settings.auth_file))
        self.budget = settings.webhook_budget
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=settings.concurrency,
                                                          thread_name_prefix="registry")
        self._cache: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
        # Fetches under way, with when each started (monotonic).
        self._inflight: dict[tuple[str, str], tuple[concurrent.futures.Future[_Entry], float]] = {}
        self._lock = threading.Lock()
        self._platforms: tuple[int, str] | None = None
        m = metrics
        self._results = {r: m.registry_lookups.labels(r) for r in ("hit", "miss", "failed-recently", "not-allowed")}

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)

    def platform(self, ctx: EvalContext) -> str:
        """The platform read from indexes: the setting, or (auto) the view's GPU nodes' architecture."""
        cluster = ctx.root.cluster
        key = id(cluster)
        if self._platforms is None or self._platforms[0] != key:
            archs: set[str] = set()
            if cluster is not None:
                archs = {rec.placement_labels().get("kubernetes.io/arch", "") for c in cluster.classes
                         if c.facts.has_gpu for rec in c.members} - {""}
            self._platforms = (key, choose_platform(self.settings.platform, archs))
        return self._platforms[1]

    # ------------------------------------------------------------------ the admission side (event loop)
    async def facts_for(self, images: Iterable[str], platform: str) -> dict[str, RegistryFacts]:
        """What is known, or learnt within the budget, about ``images``; never raises, never waits longer."""
        started = time.monotonic()
        found: dict[str, RegistryFacts] = {}
        waiting: dict[str, concurrent.futures.Future[_Entry]] = {}
        wait = 0.0
        now = time.monotonic()
        for image in images:
            ref = parse_reference(image)
            if ref is None:
                continue
            if not self.policy.registry_allowed(ref.registry):
                self._results["not-allowed"].inc()
                continue  # no request, ever, to a host the allowlist does not name
            key = (canonical(ref), platform)
            with self._lock:
                entry = self._cache.get(key)
                if entry is not None and entry.expires > now:
                    self._cache.move_to_end(key)
                else:
                    entry = None
            if entry is not None:
                if entry.facts is not None:
                    self._results["hit"].inc()
                    found[image] = replace(entry.facts, reference=image)
                else:
                    self._results["failed-recently"].inc()
                continue
            self._results["miss"].inc()
            job, since = self._start(key, ref, platform)
            # Wait for a fetch only while it is within the budget from its start: a registry that is slow makes
            # one review wait the budget, not every review of that image until the fetch gives up.
            left = min(self.budget, self.budget - (now - since))
            if left > 0:
                waiting[image] = job
                wait = max(wait, left)
        if waiting:
            wrapped = {image: asyncio.wrap_future(f) for image, f in waiting.items()}
            await asyncio.wait(list(wrapped.values()), timeout=wait)
            for image, fut in wrapped.items():
                if fut.done() and not fut.cancelled() and fut.exception() is None:
                    entry = fut.result()
                    if entry.facts is not None:
                        found[image] = replace(entry.facts, reference=image)
                elif not fut.done():
                    fut.add_done_callback(_consume)  # it goes on, and its answer lands in memory
            self.metrics.registry_wait.observe(time.monotonic() - started)
        return found

    # ------------------------------------------------------------------ fetching (pool threads)
    def _start(self, key: tuple[str, str], ref: ImageRef,
               platform: str) -> tuple[concurrent.futures.Future[_Entry], float]:
        """The fetch of ``key`` under way, or a new one; and when it started."""
        with self._lock:
            running = self._inflight.get(key)
            if running is not None:
                return running
            started = time.monotonic()
            fut = self.pool.submit(self._fetch, key, ref, platform)
            self._inflight[key] = (fut, started)
            return fut, started

    def _fetch(self, key: tuple[str, str], ref: ImageRef, platform: str) -> _Entry:
        started = time.monotonic()
        if self.client.credentials.reload_if_changed():  # the kubelet updated the mounted pull Secret
            self.client.forget_tokens()
            log_event(log, logging.INFO, "registry credentials changed; reading them again",
                      file=str(self.client.credentials.path))
        try:
            fetched = self.client.fetch(ref, platform, started + FETCH_DEADLINE)
            ttl = float("inf") if ref.digest else self.settings.tag_ttl
            entry = _Entry(fetched.facts, None, started + ttl)
            outcome = "ok"
        except FetchError as exc:
            entry = _Entry(None, exc, started + NEGATIVE_TTL)
            outcome = exc.kind
            log_event(log, logging.INFO, "registry lookup failed; answering without the image's config",
                      image=key[0], registry=ref.registry, reason=exc.kind, error=exc.message,
                      retryInSeconds=NEGATIVE_TTL)
        except Exception as exc:  # a bug must not take a pool thread's answer away silently
            entry = _Entry(None, FetchError("internal", ref.registry, str(exc)), started + NEGATIVE_TTL)
            outcome = "internal"
            log_event(log, logging.WARNING, "registry lookup raised", image=key[0], error=repr(exc))
        finally:
            self.client.close()
        self.metrics.registry_fetches.labels(outcome).inc()
        self.metrics.registry_fetch_duration.observe(time.monotonic() - started)
        with self._lock:
            self._cache[key] = entry
            self._cache.move_to_end(key)
            while len(self._cache) > self.settings.cache_entries:
                self._cache.popitem(last=False)
            self._inflight.pop(key, None)
        return entry


def _consume(fut: asyncio.Future[_Entry]) -> None:
    """Retrieve a late answer's exception, if any, so asyncio never logs it as never retrieved."""
    if not fut.cancelled():
        fut.exception()
