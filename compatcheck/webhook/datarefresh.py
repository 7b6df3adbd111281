"""Keeping the webhook's knowledge current: a background thread pulls the config's ``data.source`` (a data bundle,
``io.bundle``) on start and every ``data.refreshInterval``, and swaps in a bundle only once it is fully verified,
unpacked, validated and loaded; reviews never wait for it. A failed pull (the registry down, a tampered blob, an
invalid table) is logged and counted (``compatcheck_data_refresh_failures_total``), and the webhook goes on with
the knowledge it had. ``compatcheck_data_age_seconds`` says how old that knowledge is, ``compatcheck_data_info``
which it is."""

from __future__ import annotations

import datetime as dt
import logging
import random
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from compatcheck.core.admission import AdmissionSettings, EvaluationCache
from compatcheck.core.config import Config, RegistrySettings, apply_to_ruleset
from compatcheck.io.datastate import Knowledge, data_root
from compatcheck.webhook.logs import log_event

log = logging.getLogger("compatcheck.webhook.data")
PULL_TIMEOUT = 120.0  # seconds, one pull (manifest, config, layer)
RETRY_AFTER_FAILURE = 300.0  # seconds before a failed pull is tried again (at most the interval)
_AS_OF = re.compile(r'^asOf:\s*["\']?(\d{4}-\d{2}-\d{2})', re.MULTILINE)


def _timestamp(text: str | None) -> float | None:
    if not text:
        return None
    when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return (when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)).timestamp()


def knowledge_created(knowledge: Knowledge | None) -> float | None:
    """When the knowledge in use was built: a bundle's build time, else the built-in tables' newest asOf date."""
    if knowledge is not None and knowledge.bundle is not None and knowledge.bundle.get("created"):
        return _timestamp(str(knowledge.bundle["created"]))
    path = knowledge.path if knowledge is not None else None
    if path is None:
        from compatcheck.io.loader import builtin_rules_dir

        path = builtin_rules_dir()
    dates = []
    for table in sorted((path / "data").glob("*.y*ml")):  # the asOf line, without parsing 270 KB of YAML again
        m = _AS_OF.search(table.read_text("utf-8", errors="replace"))
        if m:
            dates.append(m.group(1))
    return _timestamp(f"{max(dates)}T00:00:00Z") if dates else None


class DataRefresher:
    """Pulls ``source`` into ``root`` (the cache directory's ``data/``) and swaps the result into ``state``."""

    def __init__(self, state: Any, config: Config, rules_dirs: list[str], source: str | None,
                 interval: float, registry: RegistrySettings, knowledge: Knowledge | None,
                 root: Path | None = None, clock: Callable[[], float] = time.time) -> None:
        self.state, self.config, self.rules_dirs = state, config, rules_dirs
        self.source, self.interval, self.registry = source, interval, registry
        self.root = root  # None: the cache directory's data/ (found at the first pull)
        self.clock = clock
        self.knowledge = knowledge
        self.created = knowledge_created(knowledge)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        metrics = state.metrics
        metrics.data_age.set_function(self.age)
        self._publish_info()

    def age(self) -> float:
        return max(0.0, self.clock() - self.created) if self.created is not None else 0.0

    def _publish_info(self) -> None:
        m, k = self.state.metrics, self.knowledge
        m.data_info.clear()
        bundle = k.bundle if k is not None and k.bundle is not None else {}
        source = "pulled" if k is not None and k.kind == "active" else ("builtin" if k is None or k.kind == "builtin"
                                                                         else "directory")
        m.data_info.labels(source, str(bundle.get("digest", "")), str(bundle.get("ref", ""))).set(1)

    # ------------------------------------------------------------------ one refresh
    def refresh(self) -> str:
        """Pull ``source`` once: "updated" (a new bundle is in use), "unchanged", or "failed" (logged, counted;
        the knowledge in use stays)."""
        from compatcheck.io import bundle
        from compatcheck.io.datastate import DataChoiceError
        from compatcheck.io.setup import CommandError, rules

        assert self.source is not None
        m = self.state.metrics
        with self._lock:
            try:
                root = self.root or data_root()
                k = self.knowledge
                current = k.bundle.get("digest") if k is not None and k.kind == "active" and k.bundle else None
                try:
                    record = bundle.pull(self.source, self.registry, PULL_TIMEOUT, root, webhook=True,
                                         current=current)
                except bundle.Unchanged:  # the manifest only: the bundle in use is the source's
                    m.data_refreshes.labels("unchanged").inc()
                    m.data_last_success.set(self.clock())
                    return "unchanged"
                entry = {**record, "dir": str(root / "bundles" / record["dir"])}
                knowledge = Knowledge("active", Path(entry["dir"]) / "rules", True, entry)
                loaded = rules(self.rules_dirs, knowledge=knowledge)
                ruleset = apply_to_ruleset(self.config, loaded.ruleset)
                settings = AdmissionSettings.from_config(self.config, ruleset)
            except (bundle.BundleError, DataChoiceError, CommandError, OSError, ValueError) as exc:
                m.data_refresh_failures.inc()
                message = getattr(exc, "message", None) or str(exc)
                log_event(log, logging.WARNING, "data bundle refresh failed; serving the knowledge in use",
                          source=self.source, error=message)
                return "failed"
            set_kb = getattr(self.state.view, "set_kb", None)
            if set_kb is not None:
                set_kb(loaded.kb)
            self.state.ruleset, self.state.settings, self.state.cache = ruleset, settings, EvaluationCache()
            self.knowledge, self.created = knowledge, _timestamp(record["created"])
            self._publish_info()
            m.data_refreshes.labels("updated").inc()
            m.data_last_success.set(self.clock())
            log_event(log, logging.INFO, "data bundle in use", source=self.source, digest=record["digest"],
                      created=record["created"])
            return "updated"

    # ------------------------------------------------------------------ the schedule
    def start(self) -> None:
        if self.source is None or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="data-refresh", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            result = self.refresh()
            wait = min(self.interval, RETRY_AFTER_FAILURE) if result == "failed" else self.interval
            # jitter, so replicas do not pull in step
            if self._stop.wait(wait * random.uniform(0.9, 1.0)):
                return
