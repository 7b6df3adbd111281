"""llmaz (https://github.com/InftyAI/llmaz): a Playground's GPUs and image come from other objects, found by name.

Pure: no I/O. A ``Playground`` (inference.llmaz.io/v1alpha1) is read as one container, ``model-runner``, through
its workload-kinds row (``spec`` flat, resources ``spec.backendRuntimeConfig.resources``). What its operator adds
from other objects (llmaz @ 3c13ff3, pkg/controller/inference/playground_controller.go buildTemplate,
pkg/controller_helper/helper.go FirstAssignedFlavor) is resolved here against the objects linted together:

- the GPUs: the claimed model (``spec.modelClaim.modelName``, or in ``spec.modelClaims.models`` the one of role
  ``main``, the default role) is an ``OpenModel`` (llmaz.io/v1alpha1, cluster-scoped); its flavor is the one named
  by the claim's first ``inferenceFlavors`` entry, else its first flavor; the flavor's ``limits`` (accelerators
  such as ``nvidia.com/gpu``) overwrite the container's. An OpenModel not in the input: its GPUs are unknown, said
  as not checked, naming it.
- the image: the ``BackendRuntime`` (inference.llmaz.io/v1alpha1, cluster-scoped) named by
  ``spec.backendRuntimeConfig.backendName`` (default ``vllm``) gives ``spec.image`` + ":" + version (the
  Playground's ``backendRuntimeConfig.version``, else the runtime's ``spec.version``). One not in the input: the
  image, and so its CUDA, is unknown, said as not checked, naming it.

The findings and records point at the Playground's own field that names the other object.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from compatcheck.core.cluster import is_gpu_resource
from compatcheck.core.jsonutil import JsonObject, mapping, sequence, text
from compatcheck.core.workloads import PodTarget, api_group

PLAYGROUND_GROUP = "inference.llmaz.io"
MODEL_GROUP = "llmaz.io"
DEFAULT_BACKEND = "vllm"  # api/inference/v1alpha1/config_types.go DefaultBackend
KINDS = ("OpenModel", "BackendRuntime")  # what a Playground reads beside it


@dataclass(frozen=True)
class LlmazIndex:
    """OpenModels and BackendRuntimes of the input, by name (both cluster-scoped)."""

    models: dict[str, JsonObject] = field(default_factory=dict)
    backends: dict[str, JsonObject] = field(default_factory=dict)


EMPTY = LlmazIndex()


def build_index(objects: Iterable[JsonObject]) -> LlmazIndex:
    models: dict[str, JsonObject] = {}
    backends: dict[str, JsonObject] = {}
    for obj in objects:
        group, kind = api_group(str(obj.get("apiVersion", ""))), obj.get("kind")
        name = text(mapping(obj.get("metadata")).get("name"))
        if name is None:
            continue
        if group == MODEL_GROUP and kind == "OpenModel":
            models[name] = obj
        elif group == PLAYGROUND_GROUP and kind == "BackendRuntime":
            backends[name] = obj
    return LlmazIndex(models, backends) if models or backends else EMPTY


def _claimed_model(spec: JsonObject) -> tuple[str | None, str, list[str]]:
    """(model name, pointer of the field naming it, inference flavors claimed)."""
    claim = mapping(spec.get("modelClaim"))
    if claim:
        flavors = [f for f in sequence(claim.get("inferenceFlavors")) if isinstance(f, str)]
        return text(claim.get("modelName")), "/spec/modelClaim/modelName", flavors
    claims = mapping(spec.get("modelClaims"))
    flavors = [f for f in sequence(claims.get("inferenceFlavors")) if isinstance(f, str)]
    for i, ref in enumerate(sequence(claims.get("models"))):
        ref = mapping(ref)
        if ref.get("role", "main") == "main":
            return text(ref.get("name")), f"/spec/modelClaims/models/{i}/name", flavors
    return None, "/spec/modelClaims", flavors


def _flavor(model: JsonObject, wanted: list[str]) -> JsonObject | None:
    flavors = [mapping(f) for f in sequence(mapping(mapping(model.get("spec")).get("inferenceConfig"))
                                            .get("flavors"))]
    if not flavors:
        return None
    if not wanted:
        return flavors[0]
    return next((f for f in flavors if f.get("name") == wanted[0]), None)


def resolve_playground(obj: JsonObject, pods: list[PodTarget], index: LlmazIndex) -> None:
    """Complete a Playground's model-runner container with its model's flavor limits and its backend's image, in
    place; what cannot be found is recorded on the pod (``unknown_gpu``, ``unknown_image``)."""
    if obj.get("kind") != "Playground" or api_group(str(obj.get("apiVersion", ""))) != PLAYGROUND_GROUP:
        return
    spec = mapping(obj.get("spec"))
    for pod in pods:
        if not pod.flat or not pod.containers:
            continue
        c = pod.containers[0]
        name, pointer, wanted = _claimed_model(spec)
        if name is not None:
            model = index.models.get(name)
            if model is None:
                pod.unknown_gpu.append((pointer, f"OpenModel {name!r} (its GPUs are its inference flavors' limits) "
                                                 "is not in the input"))
            else:
                flavor = _flavor(model, wanted)
                gpus = {str(k): v for k, v in mapping(flavor.get("limits") if flavor is not None else None).items()
                        if is_gpu_resource(str(k))}
                if gpus:  # the flavor's accelerators overwrite the container's (its own fields no longer count)
                    resources = {section: {k: v for k, v in mapping(values).items() if str(k) not in gpus}
                                 if section in ("limits", "requests") else values
                                 for section, values in mapping(c.data.get("resources")).items()}
                    c.data = {**c.data, "resources": resources}
                    c.implied_gpu, c.implied_pointer = gpus, pointer
        config = mapping(spec.get("backendRuntimeConfig"))
        backend_name = text(config.get("backendName")) or DEFAULT_BACKEND
        backend = index.backends.get(backend_name)
        where = "/spec/backendRuntimeConfig/backendName" if "backendName" in config else "/spec"
        if backend is None:
            pod.unknown_image.append((where, f"the image comes from BackendRuntime {backend_name!r}, which is not "
                                             "in the input"))
            continue
        bspec = mapping(backend.get("spec"))
        image, version = text(bspec.get("image")), text(config.get("version")) or text(bspec.get("version"))
        if image is not None and version is not None:
            c.data = {**c.data, "image": f"{image}:{version}"}
        else:
            pod.unknown_image.append((where, f"BackendRuntime {backend_name!r} names no image and version"))


__all__ = ["EMPTY", "KINDS", "LlmazIndex", "build_index", "resolve_playground"]
