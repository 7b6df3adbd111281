"""KServe: the ServingRuntime that runs an InferenceService predictor that names only a model format.

An InferenceService predictor written as ``model: {modelFormat: {name: huggingface}, args, resources}`` (or a
framework shortcut such as ``pytorch:``, which KServe reads as the model format of that name) carries no image of its
own: KServe picks a ServingRuntime (one of the InferenceService's namespace first, then a ClusterServingRuntime)
and runs the runtime's container with the predictor's fields merged over it. compatcheck does the same with the
runtimes it knows (files linted together), so the rules read the image and args that run:

- the runtime: ``model.runtime`` when named; else the runtimes that are not disabled, serve single models, list the
  format (and version, when the model gives one) in ``supportedModelFormats`` with ``autoSelect: true``, and speak
  the model's protocol (``v1`` unless ``protocolVersion`` says otherwise; a runtime without ``protocolVersions``
  speaks v1), namespaced ones before cluster ones, higher ``priority`` for the format first;
- the container: the runtime's ``kserve-container`` (else its first), with the predictor container's ``image``,
  ``command`` and ``args`` replacing the runtime's when set, its ``env`` merged by name, and its resources merged
  per key (``GetSupportingRuntimes``, ``RuntimeSupportsModel`` and ``MergeRuntimeContainers`` in kserve/kserve,
  pkg/apis/serving/v1beta1/predictor_model.go and pkg/controller/v1beta1/inferenceservice/utils).

Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from compatcheck.core.jsonutil import JsonObject, in_group, mapping, sequence, text
from compatcheck.core.workloads import PodTarget

GROUP = "serving.kserve.io"
KINDS = ("ServingRuntime", "ClusterServingRuntime")
MAIN_CONTAINER = "kserve-container"


def is_runtime(obj: JsonObject) -> bool:
    return in_group(obj, GROUP, KINDS)


@dataclass(frozen=True)
class Runtime:
    kind: str
    namespace: str | None
    name: str
    spec: JsonObject

    @property
    def where(self) -> str:
        return f"{self.kind} {self.namespace + '/' if self.namespace else ''}{self.name}"


@dataclass
class RuntimeIndex:
    """The ServingRuntimes (by namespace) and ClusterServingRuntimes an evaluation knows."""

    namespaced: dict[str | None, list[Runtime]] = field(default_factory=dict)
    cluster: list[Runtime] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.namespaced or self.cluster)

    def add(self, obj: JsonObject) -> None:
        meta = mapping(obj.get("metadata"))
        name = text(meta.get("name"))
        if name is None:
            return
        rt = Runtime(str(obj.get("kind")), text(meta.get("namespace")), name, mapping(obj.get("spec")))
        if rt.kind == "ClusterServingRuntime":
            self.cluster.append(rt)
        else:
            self.namespaced.setdefault(rt.namespace, []).append(rt)

    def _in(self, namespace: str | None) -> list[Runtime]:
        # a manifest without a namespace is applied to the InferenceService's
        found = self.namespaced.get(namespace, [])
        return found + ([r for r in self.namespaced.get(None, []) if r not in found] if namespace else [])

    def named(self, namespace: str | None, name: str) -> Runtime | None:
        return next((r for r in self._in(namespace) if r.name == name), None) or next(
            (r for r in self.cluster if r.name == name), None)

    def select(self, namespace: str | None, model: JsonObject, fmt: str) -> Runtime | None:
        """The runtime KServe would pick for a predictor model of format ``fmt``."""
        named = text(model.get("runtime"))
        version = text(mapping(model.get("modelFormat")).get("version"))
        protocol = text(model.get("protocolVersion")) or "v1"
        if named is not None:
            rt = self.named(namespace, named)
            return rt if rt is not None and _supports(rt.spec, fmt, version, explicit=True) else None
        for group in (self._in(namespace), self.cluster):
            found = [r for r in group if _eligible(r.spec, fmt, version, protocol)]
            found.sort(key=lambda r: (_rank(r.spec, fmt), r.name))
            if found:
                return found[0]
        return None


EMPTY_RUNTIMES = RuntimeIndex()


def build_runtime_index(objects: list[JsonObject]) -> RuntimeIndex:
    index = RuntimeIndex()
    for obj in objects:
        if is_runtime(obj):
            index.add(obj)
    return index


def _supports(spec: JsonObject, fmt: str, version: str | None, *, explicit: bool) -> bool:
    labels = set()
    for f in sequence(spec.get("supportedModelFormats")):
        f = mapping(f)
        if not explicit and f.get("autoSelect") is not True:
            continue
        name = text(f.get("name"))
        if name is None:
            continue
        labels.add(name)
        if text(f.get("version")) is not None:
            labels.add(f"{name}:{f['version']}")
    return (f"{fmt}:{version}" if version is not None else fmt) in labels


def _eligible(spec: JsonObject, fmt: str, version: str | None, protocol: str) -> bool:
    if spec.get("disabled") is True or spec.get("multiModel") is True:
        return False
    protocols = [str(p) for p in sequence(spec.get("protocolVersions"))] or ["v1"]
    return protocol in protocols and _supports(spec, fmt, version, explicit=False)


def _rank(spec: JsonObject, fmt: str) -> tuple[int, int]:
    """Sort key: runtimes that give the format a priority first, the highest first."""
    p = _priority(spec, fmt)
    return (0, -p) if p is not None else (1, 0)


def _priority(spec: JsonObject, fmt: str) -> int | None:
    for f in sequence(spec.get("supportedModelFormats")):
        f = mapping(f)
        if f.get("name") == fmt and isinstance(f.get("priority"), int):
            return int(f["priority"])
    return None


def runtime_container(rt: Runtime) -> JsonObject | None:
    containers = [mapping(c) for c in sequence(rt.spec.get("containers"))]
    return next((c for c in containers if c.get("name") == MAIN_CONTAINER), containers[0] if containers else None)


def merged(base: JsonObject, over: JsonObject) -> JsonObject:
    """The runtime container ``base`` with the predictor container ``over`` merged in, as KServe does."""
    out = dict(base)
    for key in ("image", "command", "args"):
        if over.get(key):
            out[key] = over[key]
    env = {text(mapping(e).get("name")): e for e in sequence(base.get("env"))}
    env.update({text(mapping(e).get("name")): e for e in sequence(over.get("env"))})
    if env:
        out["env"] = list(env.values())
    resources = {k: dict(mapping(v)) for k, v in mapping(base.get("resources")).items()}
    for section, values in mapping(over.get("resources")).items():
        resources.setdefault(section, {}).update(mapping(values))
    if resources:
        out["resources"] = resources
    return out


def resolve_predictors(obj: JsonObject, pods: list[PodTarget], index: RuntimeIndex) -> None:
    """Give each InferenceService predictor container without an image of its own (``model`` with a
    ``modelFormat``, or a framework shortcut) the container of the runtime KServe would run it with, in place.
    A pod so completed is marked ``flat``: no fix is offered against fields it does not have."""
    if not index or obj.get("kind") != "InferenceService" or not str(obj.get("apiVersion", "")).startswith(GROUP):
        return
    namespace = text(mapping(obj.get("metadata")).get("namespace"))
    for pod in pods:
        for c in pod.containers:
            if c.data.get("image") or c.rel.count("/") != 1:
                continue
            shortcut = c.rel[1:]
            fmt = text(mapping(c.data.get("modelFormat")).get("name")) if shortcut == "model" else shortcut
            if fmt is None:
                continue
            rt = index.select(namespace, c.data, fmt)
            base = runtime_container(rt) if rt is not None else None
            if base is None:
                continue
            c.data = merged(base, c.data)
            pod.flat = True
