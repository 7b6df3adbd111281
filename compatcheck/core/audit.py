"""Audit of a running cluster, the pure part: which object owns a pod (the one a finding is reported on), and the
findings of each owner once, with the pods it runs.

A pod created by a controller names it in a ``controller: true`` ownerReference; a ReplicaSet of a Deployment,
a Job of a CronJob and the pods of an operator's custom resource do the same, so following them from a pod up to
the first object that has no controller (or whose controller was not listed) finds its *owner*: a Deployment, not
its ReplicaSet or its 50 pods; a bare pod is its own owner. Only names and uids are kept per controller, never the
objects, so memory is bounded by the number of controllers, not of pods.

Pure: dicts in, references out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from compatcheck.core.jsonutil import JsonObject, mapping, sequence
from compatcheck.core.model import Finding, ObjectRef
from compatcheck.core.workloads import object_ref

MAX_OWNER_DEPTH = 8  # ownerReferences form no cycle in a sane cluster; a bound keeps a broken one from looping


def controller_uid(obj: JsonObject) -> tuple[str, ObjectRef] | None:
    """The uid and reference of the object's controller (``ownerReferences[].controller: true``), if any."""
    meta = mapping(obj.get("metadata"))
    for ref in sequence(meta.get("ownerReferences")):
        if isinstance(ref, dict) and ref.get("controller") is True and isinstance(ref.get("uid"), str):
            namespace = meta.get("namespace") if isinstance(meta.get("namespace"), str) else None
            return ref["uid"], ObjectRef(str(ref.get("apiVersion") or ""), str(ref.get("kind") or ""), namespace,
                                         str(ref.get("name") or ""))
    return None


@dataclass
class OwnerIndex:
    """uid -> (the object's reference, its controller's uid): what ``owner`` follows."""

    objects: dict[str, tuple[ObjectRef, str | None]] = field(default_factory=dict)

    def add(self, obj: JsonObject) -> None:
        uid = mapping(obj.get("metadata")).get("uid")
        if not isinstance(uid, str):
            return
        ctl = controller_uid(obj)
        self.objects[uid] = (object_ref(obj), ctl[0] if ctl else None)

    def owner(self, obj: JsonObject) -> ObjectRef:
        """The top of ``obj``'s chain of controllers among the objects added (``obj`` itself when it has none).
        A controller that was not listed (a kind compatcheck does not read, or one deleted meanwhile) ends the
        chain at the reference the last known object names."""
        ctl = controller_uid(obj)
        if ctl is None:
            return object_ref(obj)
        uid, ref = ctl
        for _ in range(MAX_OWNER_DEPTH):
            known = self.objects.get(uid)
            if known is None:
                return ref
            ref, parent = known
            if parent is None:
                return ref
            uid = parent
        return ref

    def has_controller(self, obj: JsonObject) -> bool:
        """Whether ``obj`` is run by a controller that was listed (its owner is then reported, not it)."""
        ctl = controller_uid(obj)
        return ctl is not None and ctl[0] in self.objects


def owner_key(ref: ObjectRef) -> tuple[str, str, str]:
    return (ref.kind or "", ref.namespace or "", ref.name or "")


@dataclass
class OwnerFindings:
    """The findings reported on one owner, each once (pods of one owner repeat them), per variant of the cluster
    view (one, or two for a what-if: before, after), and the running pods it has."""

    ref: ObjectRef
    findings: list[dict[tuple[str, str, str | None], Finding]]
    pods: int = 0
    gpu: bool = False  # its spec (or a pod of it that was evaluated) is a GPU pod

    def add(self, variant: int, findings: Iterable[Finding]) -> None:
        kept = self.findings[variant]
        for f in findings:
            kept.setdefault((f.rule_id, f.pointer, f.container), f if f.obj == self.ref else f.about(self.ref))


@dataclass
class _Pending:
    ref: ObjectRef
    controller: str | None
    findings: list[list[Finding]]
    gpu: bool


class AuditResult:
    """Collects an audit as it streams: workload objects first (evaluated, their controllers noted), then pods.
    ``owners()`` at the end reports each owner once: an object run by a listed controller is left out (its
    owner's own spec was evaluated), and each running pod is counted on its owner."""

    def __init__(self, variants: int = 1) -> None:
        self.variants = variants
        self.index = OwnerIndex()
        self._pending: list[_Pending] = []
        self._owners: dict[tuple[str, str, str], OwnerFindings] = {}
        self.finished: list[OwnerFindings] | None = None
        self.pods = 0  # running pods seen
        self.pods_evaluated = 0  # of which had no listed controller (bare pods, or run by an unread kind)

    def _owner(self, ref: ObjectRef) -> OwnerFindings:
        key = owner_key(ref)
        found = self._owners.get(key)
        if found is None:
            found = self._owners[key] = OwnerFindings(ref, [{} for _ in range(self.variants)])
        return found

    def add_object(self, obj: JsonObject, findings: list[list[Finding]], gpu: bool = False) -> None:
        """A workload that is no pod (a Deployment, a ReplicaSet, a custom resource) and its findings per
        variant; ``gpu``: whether it runs GPU pods. Objects must all come before the pods."""
        self.index.add(obj)
        ctl = controller_uid(obj)
        self._pending.append(_Pending(object_ref(obj), ctl[0] if ctl else None, findings, gpu))

    def pod_needs_evaluation(self, pod: JsonObject) -> bool:
        """A pod whose controller was listed is not evaluated: its owner's spec was."""
        return pod_is_running(pod) and not self.index.has_controller(pod)

    def add_pod(self, pod: JsonObject, findings: list[list[Finding]] | None = None, gpu: bool = False) -> None:
        """A pod: counted on its owner; ``findings`` (per variant) when it was evaluated itself (``gpu``: a GPU
        pod)."""
        if not pod_is_running(pod):
            return
        self.pods += 1
        owner = self._owner(self.index.owner(pod))
        owner.pods += 1
        if findings is not None:
            self.pods_evaluated += 1
            owner.gpu = owner.gpu or gpu
            for variant, found in enumerate(findings):
                owner.add(variant, found)

    def owners(self) -> list[OwnerFindings]:
        """Every owner with its findings and pods (also those without findings), sorted by kind, namespace,
        name. Call after every object and pod was added."""
        if self.finished is not None:
            return self.finished
        for p in self._pending:
            if p.controller is not None and p.controller in self.index.objects:
                continue
            owner = self._owner(p.ref)
            owner.gpu = owner.gpu or p.gpu
            for variant, found in enumerate(p.findings):
                owner.add(variant, found)
        self._pending = []
        self.finished = [self._owners[k] for k in sorted(self._owners)]
        return self.finished

    def failing(self, variant: int, threshold: int) -> list[tuple[ObjectRef, str]]:
        """(owner, rule) of each finding at or above ``threshold`` in ``variant``."""
        return [(o.ref, f.rule_id) for o in self.owners() for f in o.findings[variant].values()
                if f.severity.rank >= threshold]


def pod_is_running(pod: JsonObject) -> bool:
    """A pod that still runs or will (not Succeeded or Failed): what a finding affects."""
    return mapping(pod.get("status")).get("phase") not in ("Succeeded", "Failed")


# The resource (plural) of each kind ``compatcheck audit`` lists: what its RBAC role must allow (``list``). The
# workload table's kinds (but PodTemplate, which runs nothing), plus what the audit reads beside them. A test holds it
# equal to the table and to the chart's audit ClusterRole.
AUDIT_RESOURCES: dict[str, tuple[str, ...]] = {
    "": ("nodes", "pods", "replicationcontrollers"),  # + configmaps, in kube-public only (a Role)
    "apps": ("deployments", "statefulsets", "daemonsets", "replicasets"),
    "batch": ("jobs", "cronjobs"),
    "resource.k8s.io": ("resourceslices", "deviceclasses", "resourceclaims", "resourceclaimtemplates"),
    "apps.openshift.io": ("deploymentconfigs",),
    "argoproj.io": ("rollouts", "workflows", "workflowtemplates", "clusterworkflowtemplates", "cronworkflows"),
    "kubeflow.org": ("pytorchjobs", "tfjobs", "paddlejobs", "mpijobs", "xgboostjobs", "jaxjobs"),
    "batch.paddlepaddle.org": ("paddlejobs",),
    "ray.io": ("rayclusters", "rayjobs", "rayservices"),
    "orchestration.aibrix.ai": ("rayclusterfleets",),
    "jobset.x-k8s.io": ("jobsets",),
    "leaderworkerset.x-k8s.io": ("leaderworkersets",),
    "batch.volcano.sh": ("jobs",),
    "serving.kubeflow.org": ("inferenceservices",),  # KFServing, before KServe's rename
    "serving.kserve.io": ("inferenceservices", "inferencegraphs", "llminferenceservices", "servingruntimes",
                          "clusterservingruntimes"),
    "serving.knative.dev": ("services",),
    "sharedgpu.goc": ("sharepods",),
    "apps.nvidia.com": ("nimservices", "nimbuilds"),
    "nvidia.com": ("dynamographdeployments",),
    "grove.io": ("podcliquesets",),
    "trainer.kubeflow.org": ("trainingruntimes", "clustertrainingruntimes", "trainjobs"),
    "substratus.ai": ("servers", "models", "notebooks", "datasets"),
    "workload.serving.volcano.sh": ("modelboosters",),
    "inference.llmaz.io": ("playgrounds",),
    "kaito.sh": ("workspaces",),
    "production-stack.vllm.ai": ("vllmruntimes",),
}
