"""The fuzz suite of issue #24, run by the normal test command within a fixed budget: Hypothesis property tests with
Kubernetes-shaped objects (odd types, huge and odd scalars, deep nesting) and real manifests from ../shared/corpus
mutated in place, and a deterministic byte/structure mutator. The lint runs in-process. Asserted for every input:
no traceback and no internal error, every error in the input located (file and line), bounded time; for the webhook:
every well-formed envelope answered with its uid, every malformed body a 4xx, never a 5xx, /healthz fine after."""

from __future__ import annotations

import copy
import json
import random
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compatcheck.io.lint import LintOptions, run_lint
from compatcheck.io.loader import Loaded
from tests.conftest import SHARED

PER_INPUT_SECONDS = 2.0  # generous: a linear input of a few KiB takes milliseconds

ODD_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=False),
    st.sampled_from(["", "²", "١٢", "1" * 5000, "9" * 40 + "x", "1e999999", "0.1n", "8Ei", "-", ".", "${GPUS}",
                     "{{ .Values.x }}", "# c\r\n" * 30, "\u2028", "\ufeff", "a" * 3000, "[" * 300, "- - -"]),
    st.text(max_size=30),
)
VALUE = st.recursive(ODD_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                          st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                     max_leaves=12)


def _field(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A field that is mostly of its right shape, sometimes anything at all."""
    return st.one_of(good, good, good, VALUE)


SELECTOR_REQ = st.fixed_dictionaries({"key": _field(st.sampled_from(["nvidia.com/gpu.product", "a"])),
                                      "operator": _field(st.sampled_from(["In", "NotIn", "Exists", "Gt", "Lt"])),
                                      "values": _field(st.lists(_field(st.sampled_from(["1", "A100", "²"])),
                                                                max_size=3))})
AFFINITY = st.fixed_dictionaries({"nodeAffinity": _field(st.fixed_dictionaries({
    "requiredDuringSchedulingIgnoredDuringExecution": _field(st.fixed_dictionaries({
        "nodeSelectorTerms": _field(st.lists(_field(st.fixed_dictionaries({
            "matchExpressions": _field(st.lists(_field(SELECTOR_REQ), max_size=3))})), max_size=2))}))}))})
TOLERATION = st.fixed_dictionaries({"key": _field(st.just("nvidia.com/gpu")), "operator": _field(st.just("Exists")),
                                    "effect": _field(st.just("NoSchedule")),
                                    "tolerationSeconds": _field(st.integers(0, 10))})
QUANTITY = _field(st.sampled_from(["1", "2", "500m", "1.5", "16Gi", "0", "-1", "1e3", "²", "1" * 40]))
CONTAINER = st.fixed_dictionaries({
    "name": _field(st.just("c")),
    "image": _field(st.sampled_from(["nvcr.io/nvidia/pytorch:24.01-py3", "vllm/vllm-openai:v0.6.0", "x@sha256:1"])),
    "env": _field(st.lists(_field(st.fixed_dictionaries({"name": _field(st.just("NVIDIA_VISIBLE_DEVICES")),
                                                         "value": _field(st.just("all"))})), max_size=2)),
    "resources": _field(st.fixed_dictionaries({"limits": _field(st.dictionaries(
        st.sampled_from(["nvidia.com/gpu", "memory", "nvidia.com/mig-1g.10gb"]), QUANTITY, max_size=2))})),
})
POD_SPEC = st.fixed_dictionaries({
    "containers": _field(st.lists(_field(CONTAINER), min_size=1, max_size=2)),
    "affinity": _field(AFFINITY), "tolerations": _field(st.lists(_field(TOLERATION), max_size=2)),
    "nodeSelector": _field(st.dictionaries(st.sampled_from(["nvidia.com/gpu.product", "x"]), VALUE, max_size=2)),
    "runtimeClassName": _field(st.just("nvidia")),
})
WORKLOAD = st.one_of(
    st.builds(lambda spec: {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}, POD_SPEC),
    st.builds(lambda spec, replicas: {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                                      "spec": {"replicas": replicas, "template": {"spec": spec}}},
              POD_SPEC, _field(st.integers(0, 5))),
    st.builds(lambda spec: {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
                            "spec": {"template": {"spec": spec}}}, POD_SPEC),
)


def _lint(loaded: Loaded, texts: dict[str, str]) -> None:
    started = time.perf_counter()
    report = run_lint([], loaded, LintOptions(), texts=texts)
    took = time.perf_counter() - started
    assert took < PER_INPUT_SECONDS * len(texts), (took, len(texts))
    internal = [e for e in report.errors if e.kind == "internal"]
    assert not internal, internal[:3]
    for e in report.errors:
        assert e.path in texts and "\n" not in e.message, e
        if e.kind == "input":
            assert e.line is not None and e.line >= 1, e


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
          database=None)
@given(st.lists(WORKLOAD, min_size=1, max_size=3), st.sampled_from(["yaml", "json"]))
def test_kubernetes_shaped_objects_get_an_answer(loaded: Loaded, objects: list[Any], form: str) -> None:
    try:
        text = ("---\n".join(json.dumps(o, default=str) + "\n" for o in objects) if form == "yaml"
                else json.dumps(objects[0]))
    except ValueError:  # an integer past Python's str() limit: not a text anyone can write
        return
    _lint(loaded, {f"h.{form}": text})


# ---------------------------------------------------------------------------------------------- real manifests

CORPUS = sorted((SHARED / "corpus").glob("*/*.y*ml"))[:200] if (SHARED / "corpus").is_dir() else []
NOISE = ["\r\n", "# c\r\n" * 20, "[" * 200, "{", "1" * 5000, "²", "'", '"', ": ", "- ", "&a ", "*a", "<<: *a\n",
         "\n---\n", "\n...\n", "\t", "!!int ", "%YAML 1.1\n", "{{ .x }}", "${X}", "\ufeff", "\x85", "9" * 30 + "Ki"]
ODD = [None, True, 0, -1, 10**30, 1.5, "", "²", "1" * 5000, "x" * 2000, "(" * 100 + "true" + ")" * 100, [], [[[]]], {},
       {"a": None}, [1, "a"]]


def mutate_text(text: str, rng: random.Random) -> str:
    """Bytes: inserts of noise, deletions, truncation, splices of another manifest."""
    out = text
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(out) + 1)
        op = rng.random()
        if op < 0.45:
            out = out[:at] + rng.choice(NOISE) + out[at:]
        elif op < 0.7:
            out = out[:at] + out[at + rng.randint(1, 30):]
        elif op < 0.8:
            out = out[:at]
        else:
            other = rng.choice(CORPUS).read_text(errors="replace") if CORPUS else text
            j = rng.randrange(len(other) + 1)
            out = out[:at] + other[j:j + rng.randint(1, 120)] + out[at:]
    return out


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    stack = [(node, prefix)]
    while stack and len(out) < 2000:
        value, at = stack.pop()
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for k, v in items:
            out.append((*at, k))
            stack.append((v, (*at, k)))
    return out


def mutate_object(obj: Any, rng: random.Random) -> Any:
    """Structure: a random field replaced by a value of another type, a huge or odd scalar, or deep nesting."""
    obj = copy.deepcopy(obj)
    for _ in range(rng.randint(1, 3)):
        paths = [p for p in _paths(obj) if p]
        if not paths:
            break
        target = rng.choice(paths)
        parent = obj
        for step in target[:-1]:
            parent = parent[step]
        value: Any = copy.deepcopy(rng.choice(ODD))
        if rng.random() < 0.05:
            for _ in range(300):
                value = [value]
        parent[target[-1]] = value
    return obj


def _corpus_texts(seed: int, count: int) -> dict[str, str]:
    rng = random.Random(seed)
    texts: dict[str, str] = {}
    for i in range(count):
        src = rng.choice(CORPUS)
        text = src.read_text(errors="replace")
        if rng.random() < 0.5:
            texts[f"m{seed}-{i}.yaml"] = mutate_text(text, rng)
        else:
            from compatcheck.io.manifests import parse_text

            docs = [d.data for d in parse_text(src.name, text).documents]
            if not docs:
                continue
            try:
                texts[f"m{seed}-{i}.json"] = json.dumps(mutate_object(rng.choice(docs), rng), default=str)
            except (ValueError, RecursionError):
                continue
    return texts


# ~20,000 inputs: 100 seeds of 200 mutated real manifests each.
@pytest.mark.parametrize("seed", range(100))
def test_mutated_real_manifests_get_an_answer(loaded: Loaded, seed: int) -> None:
    if not CORPUS:
        pytest.skip("../shared/corpus is absent: the mutations of real manifests need it")
    _lint(loaded, _corpus_texts(seed, 200))


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
          database=None)
@given(st.integers(0, 2**32))
def test_hypothesis_mutations_of_real_manifests(loaded: Loaded, seed: int) -> None:
    if not CORPUS:
        pytest.skip("../shared/corpus is absent: the mutations of real manifests need it")
    _lint(loaded, _corpus_texts(seed, 3))


def test_the_mutator_is_deterministic() -> None:
    if not CORPUS:
        pytest.skip("../shared/corpus is absent")
    assert _corpus_texts(7, 20) == _corpus_texts(7, 20)
    assert Path(CORPUS[0]).is_file()
