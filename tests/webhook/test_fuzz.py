"""Recorded AdmissionReviews with random subtrees replaced by values of the wrong type: the webhook's decision
function must answer (or reject the body with ReviewError) and no rule may fail internally. Deterministic seeds."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest

from compatcheck.core.admission import AdmissionSettings, ReviewError, review
from compatcheck.core.checks.base import EvalContext
from compatcheck.io.loader import Loaded, load_nodes
from tests.conftest import ROOT, shared

ODD: list[Any] = [None, 0, -1, 1.5, 10**30, "", "x", "12.x", True, [], [1, "a"], {}, {"a": None}, "0.5", "-3"]


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += paths(v, (*prefix, i))
    return out


def mutate(body: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    body = copy.deepcopy(body)
    obj = body["request"].get("object")
    if not isinstance(obj, dict):
        return body
    for _ in range(rng.randint(1, 4)):
        candidates = [p for p in paths(obj) if p]
        target = rng.choice(candidates)
        parent: Any = obj
        for step in target[:-1]:
            parent = parent[step]
        parent[target[-1]] = copy.deepcopy(rng.choice(ODD))
    return body


@pytest.fixture(scope="module")
def ctx(loaded: Loaded) -> EvalContext:
    cluster, _ = load_nodes(str(ROOT / "examples" / "cluster-profile.yaml"), loaded.kb, 1 << 24)
    return EvalContext(loaded.kb, cluster)


@pytest.mark.parametrize("seed", range(12))
def test_mutated_reviews_never_break_a_rule(loaded: Loaded, ctx: EvalContext, seed: int) -> None:
    rng = random.Random(seed)
    bodies = [json.loads(p.read_text()) for p in sorted(shared("fixtures/admission").glob("*.json"))]
    for body in bodies:
        for _ in range(8):
            mutated = mutate(body, rng)
            for endpoint in ("validate", "mutate"):
                try:
                    response, decision = review(mutated, endpoint, loaded.ruleset, ctx,  # type: ignore[arg-type]
                                                AdmissionSettings(failure_mode="deny"))
                except ReviewError:
                    continue
                assert decision.internal_error is None, (decision.internal_error, json.dumps(mutated)[:2000])
                assert isinstance(response["response"]["allowed"], bool)
