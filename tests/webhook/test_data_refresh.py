"""The webhook's data refresh without a registry (``compatcheck.webhook.datarefresh``): the source is a bundle's
OCI layout, the clock is fixed. A refresh swaps the rules, the settings and the view's knowledge; the age and info
metrics follow; a failed pull keeps everything as it was. tests/registry/test_data_bundle.py runs the same against
the real registry, in the background thread."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

from compatcheck.core.admission import AdmissionSettings, review
from compatcheck.core.config import Config, RegistrySettings
from compatcheck.io import bundle
from compatcheck.io.datastate import Knowledge
from compatcheck.io.loader import builtin_rules_dir, load_rules
from compatcheck.webhook.app import State
from compatcheck.webhook.clusterview import StaticView
from compatcheck.webhook.datarefresh import DataRefresher, knowledge_created
from compatcheck.webhook.metrics import Metrics
from tests.conftest import admission_review
from tests.test_data_bundle import NODES, modified_rules

NOW = 1798761600.0  # 2027-01-01T00:00:00Z
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "serve", "namespace": "ml"},
       "spec": {"containers": [{"name": "main", "image": "nvidia/cuda:12.4.1-base-ubuntu22.04",
                                "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


def _ts(text: str) -> float:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_refresh_swaps_a_verified_bundle_and_a_failure_keeps_the_old(tmp_path: Path) -> None:
    built = bundle.build(modified_rules(tmp_path / "src"))
    bundle.write_layout(built, tmp_path / "layout")
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(NODES)
    loaded = load_rules()
    state = State(loaded.ruleset, AdmissionSettings(), StaticView(loaded.kb, str(nodes), []), Metrics())
    builtin = Knowledge("builtin", builtin_rules_dir(), True)
    refresher = DataRefresher(state, Config(), [], str(tmp_path / "layout"), 3600.0, RegistrySettings(), builtin,
                              root=tmp_path / "cache", clock=lambda: NOW)
    sample = state.metrics.registry.get_sample_value

    def decision() -> tuple[bool, list[str]]:
        _r, d = review(admission_review(POD), "validate", state.ruleset, state.view.snapshot.ctx, state.settings)
        return d.allowed, [f.rule_id for f in d.findings]

    created = knowledge_created(builtin)
    assert created is not None and sample("compatcheck_data_age_seconds") == NOW - created
    assert sample("compatcheck_data_info", {"source": "builtin", "digest": "", "ref": ""}) == 1
    assert decision() == (True, [])

    assert refresher.refresh() == "updated"
    assert decision() == (False, ["cuda-driver-too-old"])
    assert sample("compatcheck_data_age_seconds") == NOW - _ts(built.config["created"])
    assert sample("compatcheck_data_info", {"source": "pulled", "digest": built.digest,
                                            "ref": str(tmp_path / "layout")}) == 1
    assert sample("compatcheck_data_info", {"source": "builtin", "digest": "", "ref": ""}) is None
    assert (sample("compatcheck_data_refreshes_total", {"result": "updated"}),
            sample("compatcheck_data_last_refresh_success_timestamp_seconds")) == (1.0, NOW)
    installed = sorted((tmp_path / "cache" / "bundles").iterdir())
    assert refresher.refresh() == "unchanged"  # the manifest's digest is the bundle's in use: nothing installed
    assert sample("compatcheck_data_refreshes_total", {"result": "unchanged"}) == 1.0
    assert sorted((tmp_path / "cache" / "bundles").iterdir()) == installed and len(installed) == 1

    # the source now holds a bundle whose layer does not match its digest: refused, the old knowledge serves on
    serving, view = state.ruleset, state.view.snapshot
    shutil.rmtree(tmp_path / "layout")
    other = bundle.build(builtin_rules_dir())
    bundle.write_layout(other, tmp_path / "layout")
    layer = next(p for p in (tmp_path / "layout" / "blobs" / "sha256").iterdir()
                 if p.stat().st_size == len(other.layer))
    data = bytearray(layer.read_bytes())
    data[100] ^= 0x01
    layer.write_bytes(bytes(data))
    assert refresher.refresh() == "failed"
    assert sample("compatcheck_data_refresh_failures_total") == 1.0
    assert state.ruleset is serving and state.view.snapshot is view
    assert decision() == (False, ["cuda-driver-too-old"])
    assert sample("compatcheck_data_info", {"source": "pulled", "digest": built.digest,
                                            "ref": str(tmp_path / "layout")}) == 1
