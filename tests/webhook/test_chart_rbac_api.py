"""The chart's RBAC is exactly what the webhook uses: the webhook's live view and self-managed TLS, run against
tests/webhook/fakekube.py, make requests that each map to (API group, resource, verb, namespace, name); the roles the
chart renders (real helm) allow every one of them, and grant no resource the webhook never touches. CI's form of
tests/e2e/test_rbac_is_exactly_enough (tests/e2e/test_chart_cluster.py), which asks a real API server's authorizer."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from compatcheck.io.loader import Loaded
from compatcheck.webhook.clusterview import LiveView
from compatcheck.webhook.metrics import Metrics
from compatcheck.webhook.selftls import SelfManagedTLS
from tests.webhook.fakekube import FakeKube, fixture, running


class Access(NamedTuple):
    group: str
    resource: str
    verb: str
    namespace: str | None
    name: str | None


PATH = re.compile(r"^/(?:api/v1|apis/(?P<group>[^/]+)/[^/]+)(?:/namespaces/(?P<ns>[^/]+))?/(?P<resource>[^/]+)"
                  r"(?:/(?P<name>[^/]+))?$")


def access(path: str, query: dict[str, str]) -> Access:
    """The authorizer's view of one request (as the API server's RequestInfo resolves it)."""
    m = PATH.match(path)
    assert m, path
    method = query.get("method", "GET")
    if method == "GET":
        verb = "get" if m["name"] else ("watch" if query.get("watch") == "true" else "list")
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}[method]
    return Access(m["group"] or "", m["resource"], verb, m["ns"], m["name"])


def allows(rules: list[tuple[str | None, dict[str, Any]]], a: Access) -> bool:
    """Whether a rule of a ClusterRole (namespace None) or of a Role in the request's namespace allows it."""
    return any((ns is None or ns == a.namespace) and a.group in r["apiGroups"] and a.resource in r["resources"]
               and a.verb in r["verbs"] and (not r.get("resourceNames") or a.name in r["resourceNames"])
               for ns, r in rules)


@pytest.fixture(scope="module")
def rendered(helm_dir: str) -> list[dict[str, Any]]:
    from tests.test_chart import template

    return template(str(Path(helm_dir) / "helm"))


def test_the_chart_grants_exactly_what_the_webhook_requests(rendered: list[dict[str, Any]], loaded: Loaded,
                                                             tmp_path: Path) -> None:
    bound = {(b["roleRef"]["kind"], b["roleRef"]["name"], b["metadata"].get("namespace")) for b in rendered
             if b["kind"] in ("ClusterRoleBinding", "RoleBinding")}
    rules = [(o["metadata"].get("namespace") if o["kind"] == "Role" else None, r) for o in rendered
             if o["kind"] in ("ClusterRole", "Role")
             and (o["kind"], o["metadata"]["name"], o["metadata"].get("namespace") if o["kind"] == "Role" else None)
             in bound for r in o["rules"]]
    (deployment,) = [o for o in rendered if o["kind"] == "Deployment"]
    args = dict(a.removeprefix("--").split("=", 1) for a in deployment["spec"]["template"]["spec"]["containers"][0]
                ["args"] if "=" in a)
    namespace = deployment["metadata"]["namespace"]

    kube = FakeKube()  # every resource the view may follow is served, so that it lists and watches each
    kube.serve("/api/v1/nodes", "v1", "Node")
    kube.serve("/api/v1/namespaces/kube-public/configmaps", "v1", "ConfigMap")
    for plural, kind in (("resourceslices", "ResourceSlice"), ("deviceclasses", "DeviceClass"),
                         ("resourceclaimtemplates", "ResourceClaimTemplate"), ("resourceclaims", "ResourceClaim")):
        kube.serve(f"/apis/resource.k8s.io/v1/{plural}", "resource.k8s.io/v1", kind)
    for plural, kind in (("servingruntimes", "ServingRuntime"), ("clusterservingruntimes", "ClusterServingRuntime")):
        kube.serve(f"/apis/serving.kserve.io/v1alpha1/{plural}", "serving.kserve.io/v1alpha1", kind)
    kube.add("/api/v1/nodes", fixture("node-t4.json"))
    kube.writable.add(f"/api/v1/namespaces/{namespace}/secrets")
    adm = "/apis/admissionregistration.k8s.io/v1"
    for kind in ("Validating", "Mutating"):
        kube.put_object(f"{adm}/{kind.lower()}webhookconfigurations", {
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": f"{kind}WebhookConfiguration",
            "metadata": {"name": args[f"{kind.lower()}-config"]},
            "webhooks": [{"name": "a.example.io", "clientConfig": {"url": "https://127.0.0.1:1/"}}]})
    with running(kube):
        view = LiveView(loaded.kb, kube.client(), Metrics(), debounce=0.0)
        view.start()
        try:
            assert view.wait_synced(10) and not any(w.absent for w in view.dra_watches + view.runtime_watches)
        finally:
            view.stop()
        tls = SelfManagedTLS(kube.client(), namespace, args["tls-secret"], ["compatcheck.example.svc"],
                             args["validating-config"], args["mutating-config"], str(tmp_path / "tls"))
        tls.bootstrap()  # creates the Secret, patches both configurations
        tls.bootstrap()  # a restart: reads them again
    made = {access(p, q) for p, q in kube.requests}
    assert {a.verb for a in made} == {"list", "watch", "get", "create", "patch"}
    assert sorted(a for a in made if not allows(rules, a)) == []
    # ... and no resource is granted that the webhook never touches.
    granted = {(g, res) for _ns, r in rules for g in r["apiGroups"] for res in r["resources"]}
    assert granted == {(a.group, a.resource) for a in made}

