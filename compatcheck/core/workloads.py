"""Where pod specs live in each kind: the single kind -> pod-spec path table.

Every consumer (engine, fixes, webhook, CLI) finds pod specs and containers through this module; no
other module may hard-code a path such as ``/spec/template/spec``. Pure: no I/O.

A ``template`` location holds ``{metadata, spec}`` (a PodTemplateSpec); a ``podspec`` location holds the
PodSpec fields directly (KServe predictors, LLMInferenceService templates, ServingRuntimes); a ``flat`` location is
an operator's spec that describes one container in its own fields (NIM Operator's NIMService, Kubeflow Trainer's
TrainJob trainer, production-stack's VLLMRuntime), read as that container (``FlatContainer``) with the placement
fields (nodeSelector, affinity, tolerations) the spec itself has.
``*`` in a pattern matches every key of a mapping or every item of a list.

GPU requests written outside a container's resources count as the container's: Dynamo v1alpha1's
``services.<name>.resources.limits.gpu`` (``PodLocation.gpu_field``), and KAI Scheduler's GPU sharing
annotations ``gpu-fraction`` / ``gpu-memory`` (one shared GPU for the first container, or the one
``gpu-fraction-container-name`` names; https://github.com/NVIDIA/KAI-Scheduler/tree/main/docs/gpu-sharing).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from compatcheck.core.jsonutil import Json, JsonObject, mapping, sequence, text
from compatcheck.core.model import ObjectRef
from compatcheck.core.pointers import escape_token, split_pointer

Shape = Literal["template", "podspec", "flat"]


@dataclass(frozen=True)
class FlatContainer:
    """How a ``flat`` location describes its one container: its name (for messages), the image (a string field,
    or an object whose ``image_parts`` are joined by ``image_sep``), the resources field (Kubernetes
    ResourceRequirements, or, with ``gpu_count``, an object with a GPU count and the field naming its resource)."""

    name: str
    image_parts: tuple[str, ...] = ()  # () : ``image`` is a string
    image_sep: str = ":"
    resources: str = "resources"
    gpu_count: tuple[str, str] | None = None  # (count field of a non-Kubernetes resources, the resource it counts)
    # Command-line flags the operator builds from its fields, in its order: (flag, or "" for a positional argument;
    # pointer relative to the location, ".." up), then a field of extra args as written. Findings on them point at
    # those fields.
    flags: tuple[tuple[str, str], ...] = ()
    extra_args: str | None = None


@dataclass(frozen=True)
class PodLocation:
    pattern: str
    shape: Shape = "template"
    # Fields of a podspec location that each hold ONE container (KServe's framework shortcuts).
    single_containers: tuple[str, ...] = ()
    # A GPU count the operator writes beside the pod spec, relative to the location (".." goes up), for its
    # single containers: (pointer, the resource it counts).
    gpu_field: tuple[str, str] | None = None
    flat: FlatContainer | None = None


@dataclass(frozen=True)
class WorkloadKind:
    groups: tuple[str, ...]
    kind: str
    locations: tuple[PodLocation, ...]


def _t(*patterns: str) -> tuple[PodLocation, ...]:
    return tuple(PodLocation(p) for p in patterns)


_KSERVE_FRAMEWORKS = ("model", "tensorflow", "pytorch", "sklearn", "xgboost", "onnx", "triton", "lightgbm",
                      "paddle", "pmml", "huggingface")
_KSERVE_COMPONENTS = tuple(
    loc
    for component in ("predictor", "transformer", "explainer")
    for loc in (
        PodLocation(f"/spec/{component}", "podspec", (*_KSERVE_FRAMEWORKS, "alibi", "art")),
        PodLocation(f"/spec/{component}/workerSpec", "podspec"),
    )
)
_RAY_GROUPS = ("/headGroupSpec/template", "/workerGroupSpecs/*/template")

WORKLOAD_KINDS: tuple[WorkloadKind, ...] = (
    WorkloadKind(("",), "Pod", _t("")),
    WorkloadKind(("",), "PodTemplate", _t("/template")),
    WorkloadKind(("",), "ReplicationController", _t("/spec/template")),
    WorkloadKind(("apps", "extensions"), "Deployment", _t("/spec/template")),
    WorkloadKind(("apps",), "StatefulSet", _t("/spec/template")),  # extensions/v1beta1 never served it
    WorkloadKind(("apps", "extensions"), "DaemonSet", _t("/spec/template")),
    WorkloadKind(("apps", "extensions"), "ReplicaSet", _t("/spec/template")),
    WorkloadKind(("batch",), "Job", _t("/spec/template")),
    WorkloadKind(("batch",), "CronJob", _t("/spec/jobTemplate/spec/template")),
    WorkloadKind(("apps.openshift.io",), "DeploymentConfig", _t("/spec/template")),
    WorkloadKind(("argoproj.io",), "Rollout", _t("/spec/template")),
    WorkloadKind(("kubeflow.org",), "PyTorchJob", _t("/spec/pytorchReplicaSpecs/*/template")),
    WorkloadKind(("kubeflow.org",), "TFJob", _t("/spec/tfReplicaSpecs/*/template")),
    WorkloadKind(("kubeflow.org",), "PaddleJob", _t("/spec/paddleReplicaSpecs/*/template")),
    WorkloadKind(("kubeflow.org",), "MPIJob", _t("/spec/mpiReplicaSpecs/*/template")),
    WorkloadKind(("kubeflow.org",), "XGBoostJob", _t("/spec/xgbReplicaSpecs/*/template")),
    WorkloadKind(("kubeflow.org",), "JAXJob", _t("/spec/jaxReplicaSpecs/*/template")),
    WorkloadKind(("batch.paddlepaddle.org",), "PaddleJob", _t("/spec/ps/template", "/spec/worker/template",
                                                              "/spec/heter/template")),
    WorkloadKind(("ray.io",), "RayCluster", _t(*(f"/spec{g}" for g in _RAY_GROUPS))),
    WorkloadKind(("ray.io",), "RayJob", _t(*(f"/spec/rayClusterSpec{g}" for g in _RAY_GROUPS),
                                           "/spec/submitterPodTemplate")),
    WorkloadKind(("ray.io",), "RayService", _t(*(f"/spec/rayClusterConfig{g}" for g in _RAY_GROUPS))),
    WorkloadKind(("orchestration.aibrix.ai",), "RayClusterFleet",
                 _t(*(f"/spec/template/spec{g}" for g in _RAY_GROUPS))),
    WorkloadKind(("jobset.x-k8s.io",), "JobSet", _t("/spec/replicatedJobs/*/template/spec/template")),
    WorkloadKind(("leaderworkerset.x-k8s.io",), "LeaderWorkerSet",
                 _t("/spec/leaderWorkerTemplate/leaderTemplate", "/spec/leaderWorkerTemplate/workerTemplate")),
    WorkloadKind(("batch.volcano.sh",), "Job", _t("/spec/tasks/*/template")),
    WorkloadKind(("serving.kserve.io",), "InferenceService", _KSERVE_COMPONENTS),
    WorkloadKind(("serving.kserve.io",), "InferenceGraph", ()),
    WorkloadKind(("serving.kserve.io",), "LLMInferenceService", (
        PodLocation("/spec/template", "podspec"), PodLocation("/spec/worker", "podspec"),
        PodLocation("/spec/prefill/template", "podspec"), PodLocation("/spec/prefill/worker", "podspec"))),
    WorkloadKind(("serving.kserve.io",), "ServingRuntime", (PodLocation("/spec", "podspec"),)),
    WorkloadKind(("serving.kserve.io",), "ClusterServingRuntime", (PodLocation("/spec", "podspec"),)),
    WorkloadKind(("serving.knative.dev",), "Service", _t("/spec/template")),
    WorkloadKind(("sharedgpu.goc",), "SharePod", (PodLocation("/spec", "podspec"),)),
    # NVIDIA NIM Operator: a NIMService is one container (image {repository, tag}) with its own placement fields.
    WorkloadKind(("apps.nvidia.com",), "NIMService", (
        PodLocation("/spec", "flat", flat=FlatContainer("nim", ("repository", "tag"))),)),
    # NVIDIA Dynamo: v1alpha1 services.<name>.extraPodSpec (a PodSpec plus mainContainer, the GPU count in
    # services.<name>.resources.limits.gpu); v1beta1 components[].podTemplate (a PodTemplateSpec).
    WorkloadKind(("nvidia.com",), "DynamoGraphDeployment", (
        PodLocation("/spec/services/*/extraPodSpec", "podspec", ("mainContainer",),
                    gpu_field=("../resources/limits/gpu", "nvidia.com/gpu")),
        PodLocation("/spec/components/*/podTemplate"))),
    # Grove (the PodCliqueSets Dynamo deploys through): each clique's spec.podSpec.
    WorkloadKind(("grove.io",), "PodCliqueSet", (PodLocation("/spec/template/cliques/*/spec/podSpec", "podspec"),)),
    # Kubeflow Trainer v2: runtimes hold a JobSet template; a TrainJob's trainer is one container whose resources are
    # resourcesPerNode (its placement comes from the runtime).
    WorkloadKind(("trainer.kubeflow.org",), "TrainingRuntime",
                 _t("/spec/template/spec/replicatedJobs/*/template/spec/template")),
    WorkloadKind(("trainer.kubeflow.org",), "ClusterTrainingRuntime",
                 _t("/spec/template/spec/replicatedJobs/*/template/spec/template")),
    WorkloadKind(("trainer.kubeflow.org",), "TrainJob", (
        PodLocation("/spec/trainer", "flat", flat=FlatContainer("trainer", resources="resourcesPerNode")),)),
    # vLLM production-stack: deploymentConfig {image {registry, name}, resources {gpu}} and the vLLM arguments the
    # operator builds (deploymentForVLLMRuntime in operator/internal/controller/vllmruntime_controller.go).
    WorkloadKind(("production-stack.vllm.ai",), "VLLMRuntime", (
        PodLocation("/spec/deploymentConfig", "flat", flat=FlatContainer(
            "vllm", ("registry", "name"), "/", gpu_count=("gpu", "nvidia.com/gpu"), flags=(
                ("", "../model/modelURL"), ("--max-model-len", "../model/maxModelLen"),
                ("--dtype", "../model/dtype"), ("--tensor-parallel-size", "../vllmConfig/tensorParallelSize")),
            extra_args="../vllmConfig/extraArgs")),)),
)

_BY_KEY: dict[tuple[str, str], WorkloadKind] = {}
for _wk in WORKLOAD_KINDS:
    for _g in _wk.groups:
        key = (_g, _wk.kind)
        if key in _BY_KEY:
            raise RuntimeError(f"workload kind {key} declared twice")
        _BY_KEY[key] = _wk


def known_kind_names() -> frozenset[str]:
    """Every kind name in the table (for bounding metric labels to a closed set)."""
    return frozenset(kind for _group, kind in _BY_KEY)


def api_group(api_version: str) -> str:
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def workload_kind(obj: JsonObject) -> WorkloadKind | None:
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return None
    return _BY_KEY.get((api_group(api_version), kind))


def object_ref(obj: JsonObject) -> ObjectRef:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    name = text(meta.get("name"))
    if name is None and isinstance(meta.get("generateName"), str):
        name = meta["generateName"] + "*"
    ns = text(meta.get("namespace"))
    api_version = text(obj.get("apiVersion"))
    kind = text(obj.get("kind"))
    return ObjectRef(api_version, kind, ns, name)


@dataclass
class ContainerTarget:
    name: str
    pointer: str
    data: JsonObject  # the container; for a ``flat`` location, the container its operator's fields describe
    init: bool
    # Pointer relative to the pod spec, e.g. /containers/0 or /predictor-style /model.
    rel: str
    # GPU requests written outside the container's resources (KAI's sharing annotations, Dynamo's service
    # resources), and where.
    implied_gpu: dict[str, Json] = field(default_factory=dict)
    implied_pointer: str = ""
    # Where an element of a ``flat`` container's synthesised command or args really is ("args/1" -> pointer).
    field_pointers: dict[str, str] = field(default_factory=dict)

    def pointer_at(self, key: str, index: int) -> str:
        """The pointer of ``key[index]`` (``args``, ``command``) in the object."""
        return self.field_pointers.get(f"{key}/{index}") or f"{self.pointer}/{key}/{index}"


@dataclass
class PodTarget:
    """One pod spec inside an object, with the metadata that governs it."""

    ref: ObjectRef
    obj: JsonObject
    pointer: str  # absolute pointer of the PodSpec inside the object
    spec: JsonObject
    annotations: dict[str, str]  # object annotations with the template's merged over them
    labels: dict[str, str]
    containers: list[ContainerTarget]
    # The pod template ({metadata, spec}) this spec belongs to, when it is not the object itself (a Deployment's
    # /spec/template); None for Pods and for specs without their own metadata (KServe predictors).
    template_pointer: str | None = None
    template_annotations: JsonObject | None = None
    flat: bool = False  # an operator's flat spec, read as one container (FlatContainer)


def _walk(node: Json, tokens: list[str], prefix: str) -> Iterator[tuple[str, Json]]:
    if not tokens:
        yield prefix, node
        return
    head, rest = tokens[0], tokens[1:]
    if head == "*":
        if isinstance(node, dict):
            for k, v in node.items():
                yield from _walk(v, rest, f"{prefix}/{escape_token(str(k))}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                yield from _walk(v, rest, f"{prefix}/{i}")
        return
    if isinstance(node, dict) and head in node:
        yield from _walk(node[head], rest, f"{prefix}/{escape_token(head)}")
    elif isinstance(node, list) and head.isdigit() and int(head) < len(node):
        yield from _walk(node[int(head)], rest, f"{prefix}/{head}")


def _str_map(value: Json) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {str(k): v if isinstance(v, str) else str(v) for k, v in value.items() if v is not None}


def pod_targets(obj: JsonObject) -> list[PodTarget]:
    """Every pod spec in ``obj`` (empty for kinds that carry none)."""
    wk = workload_kind(obj)
    if wk is None:
        return []
    ref = object_ref(obj)
    meta = mapping(obj.get("metadata"))
    obj_annotations = _str_map(meta.get("annotations"))
    obj_labels = _str_map(meta.get("labels"))
    out: list[PodTarget] = []
    for loc in wk.locations:
        for pointer, node in _walk(obj, split_pointer(loc.pattern), ""):
            if not isinstance(node, dict):
                continue
            template_pointer: str | None = None
            template_annotations: JsonObject | None = None
            if loc.shape == "template":
                spec = node.get("spec")
                spec_pointer = f"{pointer}/spec"
                tmeta = mapping(node.get("metadata"))
                if pointer:
                    template_pointer, template_annotations = pointer, mapping(tmeta.get("annotations"))
                annotations = obj_annotations if pointer == "" else {**obj_annotations,
                                                                     **_str_map(tmeta.get("annotations"))}
                labels = _str_map(tmeta.get("labels"))
            else:
                spec, spec_pointer = node, pointer
                annotations, labels = obj_annotations, obj_labels
            if not isinstance(spec, dict):
                continue
            if loc.flat is not None:
                containers = [_flat_container(obj, spec, spec_pointer, loc.flat)]
            else:
                containers = _containers(spec, spec_pointer, loc.single_containers)
            if loc.gpu_field is not None:
                where = _relative(pointer, loc.gpu_field[0])
                count = _at(obj, where)
                if count is not None:
                    for c in containers:
                        if c.rel.count("/") == 1 and c.rel[1:] in loc.single_containers:
                            c.implied_gpu, c.implied_pointer = {loc.gpu_field[1]: count}, where
            _kai_sharing(containers, annotations, template_pointer or "")
            out.append(PodTarget(ref, obj, spec_pointer, spec, annotations, labels, containers, template_pointer,
                                 template_annotations, loc.flat is not None))
    return out


KAI_FRACTION, KAI_MEMORY, KAI_CONTAINER = "gpu-fraction", "gpu-memory", "gpu-fraction-container-name"


def _kai_sharing(containers: list[ContainerTarget], annotations: dict[str, str], template_pointer: str) -> None:
    """KAI Scheduler's GPU sharing: a ``gpu-fraction`` or ``gpu-memory`` annotation asks for part of one GPU (a
    whole device that KAI's reservation pod holds on the node), for the first container or the one named."""
    key = KAI_FRACTION if KAI_FRACTION in annotations else KAI_MEMORY if KAI_MEMORY in annotations else None
    if key is None or not containers:
        return
    named = annotations.get(KAI_CONTAINER)
    regular = [c for c in containers if not c.init]
    chosen = next((c for c in containers if c.name == named), None) if named else (regular or containers)[0]
    if chosen is None or chosen.implied_gpu:
        return
    chosen.implied_gpu = {"nvidia.com/gpu": 1}
    chosen.implied_pointer = f"{template_pointer}/metadata/annotations/{escape_token(key)}"


def _relative(pointer: str, rel: str) -> str:
    tokens = split_pointer(pointer)
    for t in rel.split("/"):
        if t == "..":
            tokens = tokens[:-1]
        elif t:
            tokens.append(t)
    return "".join(f"/{escape_token(t)}" for t in tokens)


def _at(obj: Json, pointer: str) -> Json:
    node: Json = obj
    for t in split_pointer(pointer):
        if isinstance(node, dict) and t in node:
            node = node[t]
        else:
            return None
    return node


def _flat_container(obj: JsonObject, spec: JsonObject, pointer: str, flat: FlatContainer) -> ContainerTarget:
    """The container an operator's flat spec describes, as Kubernetes would write it."""
    data: JsonObject = {"name": flat.name}
    where: dict[str, str] = {}
    image = spec.get("image")
    if flat.image_parts:
        parts = mapping(image)
        if all(isinstance(parts.get(k), str | int | float) and str(parts[k]) for k in flat.image_parts):
            data["image"] = flat.image_sep.join(str(parts[k]) for k in flat.image_parts)
    elif isinstance(image, str):
        data["image"] = image
    for key in ("command", "args", "env"):
        if isinstance(spec.get(key), list):
            data[key] = spec[key]
    resources = mapping(spec.get(flat.resources))
    claims: list[Json] = []
    for i, entry in enumerate(sequence(spec.get("draResources"))):
        only = [r for r in sequence(mapping(entry).get("requests")) if isinstance(r, str)]
        claims.extend([{"name": f"draResources[{i}]", "request": r} for r in only] or [{"name": f"draResources[{i}]"}])
    if claims:  # NIM: every DRA resource is the model container's (as compatcheck.core.dra names them)
        resources = {**resources, "claims": claims}
    if flat.gpu_count is not None:
        count = resources.get(flat.gpu_count[0])
        if count is not None:
            data["resources"] = {"limits": {flat.gpu_count[1]: count}}
    elif resources:
        data["resources"] = resources
    args: list[Json] = list(sequence(data.get("args")))
    for flag, rel in flat.flags:
        at = _relative(pointer, rel)
        value = _at(obj, at)
        if isinstance(value, str | int | float) and not isinstance(value, bool) and str(value) and value != 0:
            words = [flag, str(value)] if flag else [str(value)]
            for word in words:
                where[f"args/{len(args)}"] = at
                args.append(word)
    if flat.extra_args is not None:
        at = _relative(pointer, flat.extra_args)
        for i, extra in enumerate(sequence(_at(obj, at))):
            where[f"args/{len(args)}"] = f"{at}/{i}"
            args.append(extra)
    if args:
        data["args"] = args
    return ContainerTarget(flat.name, pointer, data, False, "", field_pointers=where)


def _containers(spec: JsonObject, spec_pointer: str, singles: tuple[str, ...]) -> list[ContainerTarget]:
    out: list[ContainerTarget] = []
    for field_name, init in (("initContainers", True), ("containers", False)):
        items = spec.get(field_name)
        if not isinstance(items, list):
            continue
        for i, c in enumerate(items):
            if isinstance(c, dict):
                name = text(c.get("name")) or f"{field_name}[{i}]"
                rel = f"/{field_name}/{i}"
                out.append(ContainerTarget(name, spec_pointer + rel, c, init, rel))
    for field_name in singles:
        c = spec.get(field_name)
        if isinstance(c, dict):
            name = text(c.get("name")) or field_name
            rel = f"/{field_name}"
            out.append(ContainerTarget(name, spec_pointer + rel, c, False, rel))
    return out
