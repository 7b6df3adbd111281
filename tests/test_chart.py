"""The Helm chart with a real helm: lint and template in every TLS mode, Kubernetes schema validation of
what it renders, dogfooding (compatcheck finds nothing in its own chart), the webhook wiring against the
server's real routes and CLI, RBAC scope, values.schema.json, the generated README and the Dockerfile."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.conftest import ROOT

CHART = ROOT / "charts" / "compatcheck"
MODES = {
    "self-managed": [],
    "cert-manager": ["--set", "tls.mode=cert-manager"],
    "cert-manager-issuer": ["--set", "tls.mode=cert-manager", "--set", "tls.certManager.issuerRef.name=corp-ca",
                            "--set", "tls.certManager.issuerRef.kind=ClusterIssuer"],
    "secret": ["--set", "tls.mode=secret", "--set", "tls.secretName=my-tls", "--set", "tls.caBundle=Q0FCVU5ETEU="],
    "no-live-view": ["--set", "clusterView.mode=none", "--set", "tls.mode=secret", "--set", "tls.caBundle=QUJD"],
    "url": ["--set", "webhook.url=https://127.0.0.1:8443"],
    "registry": ["--set", "registry.pullSecret=corp-pull", "--set", "registry.caConfigMap=corp-ca",
                 "--set", "registry.allow={registry.corp,*.corp.example,registry.corp:5000}",
                 "--set", "registry.redirectHosts={blobs.corp.example}", "--set-json", "registry.budgetSeconds=0.25"],
}
CRD_KINDS = {"Issuer", "Certificate", "ServiceMonitor"}


@pytest.fixture(scope="module")
def helm(helm_dir: str) -> str:
    return str(Path(helm_dir) / "helm")


def template(helm: str, *args: str) -> list[dict[str, Any]]:
    proc = subprocess.run([helm, "template", "cc", str(CHART), "--namespace", "compatcheck", *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [d for d in YAML(typ="safe").load_all(proc.stdout) if d]


def by_kind(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


@pytest.mark.parametrize("mode", MODES)
def test_helm_lint(helm: str, mode: str) -> None:
    proc = subprocess.run([helm, "lint", str(CHART), "--strict", *MODES[mode]], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("mode", MODES)
def test_rendered_objects_are_valid_kubernetes(helm: str, mode: str) -> None:
    import kubernetes_validate

    objs = template(helm, *MODES[mode])
    for obj in objs:
        if obj["kind"] in CRD_KINDS:
            continue
        kubernetes_validate.validate(obj, "1.30", strict=True)


@pytest.mark.parametrize("mode", MODES)
def test_chart_is_clean_under_its_own_linter(helm: str, mode: str, tmp_path: Path) -> None:
    proc = subprocess.run([helm, "template", "cc", str(CHART), "-n", "compatcheck", *MODES[mode]],
                          capture_output=True, text=True)
    lint = subprocess.run([sys.executable, "-m", "compatcheck", "lint", "-", "--format", "json", "--fail-on", "info"],
                          input=proc.stdout, capture_output=True, text=True, cwd=ROOT)
    assert lint.returncode == 0, lint.stdout


def test_webhooks_point_at_routes_and_ports_the_server_serves(helm: str) -> None:
    from compatcheck.core.admission import AdmissionSettings
    from compatcheck.io.loader import load_rules
    from compatcheck.webhook.app import State, make_app
    from compatcheck.webhook.clusterview import Snapshot
    from compatcheck.webhook.metrics import Metrics

    objs = template(helm)
    served = {(r.method, r.resource.canonical) for r in make_app(State(
        load_rules().ruleset, AdmissionSettings(), type("V", (), {"snapshot": Snapshot(None, True)})(),  # type: ignore[arg-type]
        Metrics())).router.routes() if r.resource is not None}
    (svc,) = by_kind(objs, "Service")
    (deploy,) = by_kind(objs, "Deployment")
    container = deploy["spec"]["template"]["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    svc_ports = {p["port"]: p["targetPort"] for p in svc["spec"]["ports"]}
    assert f"--port={ports['https']}" in container["args"]
    for kind, path in (("ValidatingWebhookConfiguration", "/validate"), ("MutatingWebhookConfiguration", "/mutate")):
        (cfg,) = by_kind(objs, kind)
        for wh in cfg["webhooks"]:
            cc = wh["clientConfig"]["service"]
            assert cc["name"] == svc["metadata"]["name"] and cc["namespace"] == "compatcheck"
            assert cc["path"] == path and ("POST", path) in served
            assert svc_ports[cc["port"]] == "https"
            assert wh["sideEffects"] == "None" and wh["admissionReviewVersions"] == ["v1"]
    for probe in ("livenessProbe", "readinessProbe"):
        get = container[probe]["httpGet"]
        assert ("GET", get["path"]) in served and get["port"] == "https" and get["scheme"] == "HTTPS"


@pytest.mark.parametrize("mode", MODES)
def test_deployment_args_are_valid_cli_flags(helm: str, mode: str) -> None:
    from compatcheck.cli.entry import parser

    (deploy,) = by_kind(template(helm, *MODES[mode]), "Deployment")
    args = deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    ns = parser().parse_args(["webhook", "serve", *args])  # the Dockerfile's ENTRYPOINT + the chart's args
    assert ns.port == 8443 and ns.config == "/etc/compatcheck/config/config.yaml"
    assert ns.metrics_host == "0.0.0.0"  # Prometheus scrapes the pod IP; the server's default is the loopback
    if mode in ("self-managed", "url", "registry"):
        assert ns.tls_secret == "cc-compatcheck-tls" and ns.validating_config == "cc-compatcheck"
        assert "cc-compatcheck.compatcheck.svc" in ns.tls_dns
    else:
        assert ns.cert_file == "/etc/compatcheck/tls/tls.crt"


NAMESPACED = {"ServiceAccount", "ConfigMap", "Service", "PodDisruptionBudget", "Deployment", "Role", "RoleBinding",
              "ServiceMonitor", "Issuer", "Certificate"}
CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"}
EVERYTHING_ON = ["--set", "metrics.serviceMonitor.enabled=true", "--set", "podDisruptionBudget.enabled=true",
                 "--set-string", "rules.extra\\.yaml=rules: []", "--set-string", "ruleData.images\\.yaml=rows: []"]


@pytest.mark.parametrize("mode", ["self-managed", "cert-manager"])
def test_every_namespaced_object_names_the_release_namespace(helm: str, mode: str) -> None:
    """`helm template | kubectl apply -f -` without -n must not scatter the release over the current namespace:
    every namespaced object says its namespace (kube-public for the CRL Role and RoleBinding), and no
    cluster-scoped object has one."""
    proc = subprocess.run([helm, "template", "cc", str(CHART), "--namespace", "gpu-policy", *MODES[mode],
                           *EVERYTHING_ON], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    objs = [d for d in YAML(typ="safe").load_all(proc.stdout) if d]
    kinds = {o["kind"] for o in objs}
    assert kinds <= NAMESPACED | CLUSTER_SCOPED, f"say whether {kinds - NAMESPACED - CLUSTER_SCOPED} is namespaced"
    expected = NAMESPACED - ({"Issuer", "Certificate"} if mode == "self-managed" else set())
    assert expected <= kinds  # every optional object was rendered
    wrong = {}
    for o in objs:
        meta = o["metadata"]
        if o["kind"] in CLUSTER_SCOPED:
            want = None
        elif o["kind"] in ("Role", "RoleBinding") and meta["name"] == "cc-compatcheck-crl":
            want = "kube-public"
        else:
            want = "gpu-policy"
        if meta.get("namespace") != want:
            wrong[f"{o['kind']}/{meta['name']}"] = meta.get("namespace")
    assert wrong == {}
    assert len(by_kind(objs, "ConfigMap")) == 3


def test_hardened_pod(helm: str) -> None:
    (deploy,) = by_kind(template(helm), "Deployment")
    spec = deploy["spec"]["template"]["spec"]
    c = spec["containers"][0]
    assert deploy["spec"]["replicas"] == 2
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert c["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]}}
    assert c["resources"]["limits"] and c["resources"]["requests"]
    assert spec["affinity"]["podAntiAffinity"]
    assert "checksum/config" in deploy["spec"]["template"]["metadata"]["annotations"]
    (pdb,) = by_kind(template(helm), "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    (sa,) = by_kind(template(helm), "ServiceAccount")
    assert sa["automountServiceAccountToken"] is False
    assert spec["automountServiceAccountToken"] is True  # live view: only the pod that needs the API gets a token
    (dep_none,) = by_kind(template(helm, *MODES["no-live-view"]), "Deployment")
    assert dep_none["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


def test_config_change_rolls_the_pods(helm: str) -> None:
    def checksum(*args: str) -> str:
        (deploy,) = by_kind(template(helm, *args), "Deployment")
        return str(deploy["spec"]["template"]["metadata"]["annotations"]["checksum/config"])

    assert checksum() != checksum("--set", "config.webhook.mode=warn")
    assert checksum() != checksum("--set-string", "ruleData.images\\.yaml=rows: []")


def test_rbac_is_least_privilege(helm: str) -> None:
    objs = template(helm)
    cluster_rules = [r for o in by_kind(objs, "ClusterRole") for r in o["rules"]]
    assert not any("configmaps" in r["resources"] or "secrets" in r["resources"] for r in cluster_rules)
    assert all(set(r["verbs"]) <= {"get", "list", "watch", "patch"} for r in cluster_rules)
    webhook_rules = [r for r in cluster_rules if "validatingwebhookconfigurations" in r["resources"]]
    assert webhook_rules and all(r["resourceNames"] == ["cc-compatcheck"] for r in webhook_rules)
    roles = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in by_kind(objs, "Role")}
    crl = roles[("kube-public", "cc-compatcheck-crl")]
    assert crl["rules"] == [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]
    tls = roles[("compatcheck", "cc-compatcheck-tls")]
    assert {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["cc-compatcheck-tls"],
            "verbs": ["get", "update"]} in tls["rules"]
    assert not any(o["kind"] in ("ClusterRole", "Role") for o in template(helm, *MODES["no-live-view"]))
    # the DRA objects: read-only, and only with clusterView.dra
    dra = [r for r in cluster_rules if "resource.k8s.io" in r["apiGroups"]]
    assert dra == [{"apiGroups": ["resource.k8s.io"], "verbs": ["get", "list", "watch"],
                    "resources": ["resourceslices", "deviceclasses", "resourceclaims", "resourceclaimtemplates"]}]
    kserve = [r for r in cluster_rules if "serving.kserve.io" in r["apiGroups"]]
    assert kserve == [{"apiGroups": ["serving.kserve.io"], "verbs": ["get", "list", "watch"],
                       "resources": ["servingruntimes", "clusterservingruntimes"]}]
    assert not any("serving.kserve.io" in r["apiGroups"] for o in by_kind(
        template(helm, "--set", "clusterView.servingRuntimes=false"), "ClusterRole") for r in o["rules"])
    off = template(helm, "--set", "clusterView.dra=false")
    assert not any("resource.k8s.io" in r["apiGroups"] for o in by_kind(off, "ClusterRole") for r in o["rules"])
    (cfg,) = by_kind(off, "ValidatingWebhookConfiguration")
    assert not any("resource.k8s.io" in r["apiGroups"] for wh in cfg["webhooks"] for r in wh["rules"])


def test_webhook_scope(helm: str) -> None:
    objs = template(helm, "--set", "webhook.excludeNamespaces={batch}")
    (val,) = by_kind(objs, "ValidatingWebhookConfiguration")
    (mut,) = by_kind(objs, "MutatingWebhookConfiguration")
    names = [w["name"] for w in val["webhooks"]]
    assert names == ["pods.validate.compatcheck.io", "workloads.validate.compatcheck.io",
                     "cronjobs.validate.compatcheck.io", "podtemplates.validate.compatcheck.io",
                     "resource-claims.validate.compatcheck.io", "custom-resources.validate.compatcheck.io",
                     "crl-configmaps.validate.compatcheck.io"]
    pods = val["webhooks"][0]
    excluded = pods["namespaceSelector"]["matchExpressions"][0]
    assert excluded["operator"] == "NotIn" and excluded["values"] == ["kube-system", "kube-node-lease",
                                                                      "compatcheck", "batch"]
    assert pods["objectSelector"]["matchExpressions"][0]["key"] == "compatcheck.io/ignore"
    assert "object.spec.containers.exists" in pods["matchConditions"][0]["expression"]
    assert pods["failurePolicy"] == "Fail" and pods["timeoutSeconds"] == 5
    assert all(w["reinvocationPolicy"] == "IfNeeded" and w["failurePolicy"] == "Ignore" for w in mut["webhooks"])
    assert not any("configmaps" in r["resources"] for w in mut["webhooks"] for r in w["rules"])
    crl = val["webhooks"][-1]
    assert crl["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "kube-public"}}
    no_cel = template(helm, "--set", "webhook.matchConditions=false")
    assert not any("matchConditions" in w for o in by_kind(no_cel, "ValidatingWebhookConfiguration")
                   for w in o["webhooks"])


def test_tls_modes(helm: str) -> None:
    cm = template(helm, *MODES["cert-manager"])
    (val,) = by_kind(cm, "ValidatingWebhookConfiguration")
    assert val["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == "compatcheck/cc-compatcheck"
    certs = {o["metadata"]["name"]: o for o in by_kind(cm, "Certificate")}
    assert certs["cc-compatcheck"]["spec"]["dnsNames"] == ["cc-compatcheck.compatcheck.svc",
                                                           "cc-compatcheck.compatcheck.svc.cluster.local"]
    assert certs["cc-compatcheck-ca"]["spec"]["isCA"] is True
    own = template(helm, *MODES["cert-manager-issuer"])
    assert [o["spec"]["issuerRef"] for o in by_kind(own, "Certificate")] == [{"name": "corp-ca",
                                                                            "kind": "ClusterIssuer"}]
    assert by_kind(own, "Issuer") == []
    sec = template(helm, *MODES["secret"])
    (val,) = by_kind(sec, "ValidatingWebhookConfiguration")
    assert {w["clientConfig"]["caBundle"] for w in val["webhooks"]} == {"Q0FCVU5ETEU="}
    (deploy,) = by_kind(sec, "Deployment")
    volumes = {v["name"]: v for v in deploy["spec"]["template"]["spec"]["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == "my-tls"


@pytest.mark.parametrize(("url", "host"), [
    ("https://127.0.0.1:18443", "127.0.0.1"),
    ("https://[::1]:8443/", "::1"),
    ("https://hook.example.com/base/", "hook.example.com"),
    ("https://hook.example.com", "hook.example.com"),
])
def test_webhook_url_replaces_the_service(helm: str, url: str, host: str) -> None:
    """webhook.url: a url clientConfig (/validate, /mutate appended) instead of the Service, for an API server
    that cannot reach Services; self-managed TLS gets the URL's host (no port, no brackets) into its SANs."""
    objs = template(helm, "--set", f"webhook.url={url}")
    base = url.rstrip("/")
    for kind, path in (("ValidatingWebhookConfiguration", "/validate"), ("MutatingWebhookConfiguration", "/mutate")):
        (cfg,) = by_kind(objs, kind)
        assert [w["clientConfig"] for w in cfg["webhooks"]] == [{"url": base + path}] * len(cfg["webhooks"])
    (deploy,) = by_kind(objs, "Deployment")
    assert [a for a in deploy["spec"]["template"]["spec"]["containers"][0]["args"] if a.startswith("--tls-dns")] == [
        "--tls-dns=cc-compatcheck.compatcheck.svc", "--tls-dns=cc-compatcheck.compatcheck.svc.cluster.local",
        f"--tls-dns={host}"]
    sec = template(helm, *MODES["secret"], "--set", f"webhook.url={url}")
    (val,) = by_kind(sec, "ValidatingWebhookConfiguration")
    assert {json.dumps(w["clientConfig"]) for w in val["webhooks"]} == {
        json.dumps({"url": base + "/validate", "caBundle": "Q0FCVU5ETEU="})}
    (deploy,) = by_kind(sec, "Deployment")
    assert not any(a.startswith("--tls-dns") for a in deploy["spec"]["template"]["spec"]["containers"][0]["args"])


@pytest.mark.parametrize(("args", "message"), [
    (["--set", "replicaCount=0"], "minimum"),
    (["--set", "tls.mode=vault"], "/tls/mode"),
    (["--set", "tls.mode=secret"], "caBundle"),
    (["--set", "webhook.validate.timeoutSeconds=60"], "maximum"),
    (["--set", "webhook.validate.failurePolicy=Sometimes"], "/webhook/validate/failurePolicy"),
    (["--set", "colour=red"], "colour"),
    (["--set", "config.webhook.mode=loud"], "/config/webhook/mode"),
    (["--set", "metrics.port=8443"], "/metrics/port"),
    (["--set", "webhook.url=http://hook.example.com"], "/webhook/url"),
    (["--set", "webhook.url=https://user@hook.example.com"], "/webhook/url"),
    (["--set", "webhook.url=https://hook.example.com/?q=1"], "/webhook/url"),
    (["--set", "registry.allow={https://registry.corp/v2}"], "/registry/allow/0"),
    (["--set", "registry.pullSecret=Corp_Pull"], "/registry/pullSecret"),
    (["--set", "registry.budgetSeconds=0"], "/registry/budgetSeconds"),
    (["--set", "driverPolicy.forwardCompatibility=yes"], "/driverPolicy/forwardCompatibility"),
    (["--set", "driverPolicy.minorVersion=true"], "minorVersion"),
    (["--set", "driverPolicy.assumedSeverity=loud"], "/driverPolicy/assumedSeverity"),
    (["--set", "config.driverPolicy.forwardCompatibility=true"], "/config/driverPolicy"),
    (["--set", "webhook.warnUnchecked=yes"], "/webhook/warnUnchecked"),
])
def test_values_schema_rejects_bad_values(helm: str, args: list[str], message: str) -> None:
    proc = subprocess.run([helm, "template", "cc", str(CHART), *args], capture_output=True, text=True)
    assert proc.returncode != 0
    assert message in proc.stderr


@pytest.mark.parametrize(("args", "policy"), [
    ([], {"forwardCompatibility": False, "minorVersionCompatibility": False, "assumedSeverity": "rule"}),
    (["--set", "driverPolicy.forwardCompatibility=true"], {"forwardCompatibility": True,
                                                           "minorVersionCompatibility": False,
                                                           "assumedSeverity": "rule"}),
    (["--set", "driverPolicy.minorVersionCompatibility=true", "--set", "driverPolicy.assumedSeverity=warning"],
     {"forwardCompatibility": False, "minorVersionCompatibility": True, "assumedSeverity": "warning"}),
])
def test_the_driver_policy_value_is_rendered_into_the_config(helm: str, tmp_path: Path, args: list[str],
                                                              policy: dict[str, bool]) -> None:
    """The chart's driverPolicy is the config's: the webhook reads it from the mounted config.yaml, and a change
    rolls the pods."""
    from compatcheck.core.model import Severity
    from compatcheck.core.policy import DriverPolicy
    from compatcheck.io.config import load_config

    cm = next(o for o in by_kind(template(helm, *args), "ConfigMap") if o["metadata"]["name"].endswith("-config"))
    rendered = YAML(typ="safe").load(cm["data"]["config.yaml"])
    assert rendered["driverPolicy"] == policy
    assert rendered["webhook"]["mode"] == "enforce"  # the rest of config is kept
    (tmp_path / "config.yaml").write_text(cm["data"]["config.yaml"])
    assert load_config(str(tmp_path / "config.yaml")).driver_policy == DriverPolicy(
        policy["forwardCompatibility"], policy["minorVersionCompatibility"],
        None if policy["assumedSeverity"] == "rule" else Severity(policy["assumedSeverity"]))


@pytest.mark.parametrize(("args", "warn"), [
    ([], False),
    (["--set", "webhook.warnUnchecked=true"], True),
    (["--set", "webhook.warnUnchecked=true", "--set", "config.webhook.mode=warn"], True),
])
def test_the_warn_unchecked_value_is_rendered_into_the_config(helm: str, tmp_path: Path, args: list[str],
                                                              warn: bool) -> None:
    """webhook.warnUnchecked turns on the webhook's warnings on GPU objects it could not check (the config's
    webhook.warnUnchecked, docs/coverage.md), keeping the rest of config.webhook."""
    from compatcheck.io.config import load_config

    cm = next(o for o in by_kind(template(helm, *args), "ConfigMap") if o["metadata"]["name"].endswith("-config"))
    rendered = YAML(typ="safe").load(cm["data"]["config.yaml"])
    assert rendered["webhook"].get("warnUnchecked", False) is warn
    assert rendered["webhook"]["mode"] == ("warn" if "config.webhook.mode=warn" in args else "enforce")
    (tmp_path / "config.yaml").write_text(cm["data"]["config.yaml"])
    assert load_config(str(tmp_path / "config.yaml")).warn_unchecked is warn
    if warn:
        (plain,) = by_kind(template(helm), "Deployment")
        (warned,) = by_kind(template(helm, *args), "Deployment")
        key = "checksum/config"
        assert plain["spec"]["template"]["metadata"]["annotations"][key] != \
            warned["spec"]["template"]["metadata"]["annotations"][key]


def test_a_driver_policy_change_rolls_the_pods(helm: str) -> None:
    (plain,) = by_kind(template(helm), "Deployment")
    (declared,) = by_kind(template(helm, "--set", "driverPolicy.forwardCompatibility=true"), "Deployment")
    key = "checksum/config"
    assert plain["spec"]["template"]["metadata"]["annotations"][key] != \
        declared["spec"]["template"]["metadata"]["annotations"][key]


def test_generated_chart_readme_is_current() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "chart_readme.py"), "--check"], cwd=ROOT)
    assert proc.returncode == 0, "charts/compatcheck/README.md is stale: python scripts/chart_readme.py"


def test_dockerfile_installs_the_webhook_wheel_and_runs_serve() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert "python -m build --wheel" in text and "[webhook]" in text
    assert "USER 65532:65532" in text
    assert 'ENTRYPOINT ["compatcheck", "webhook", "serve"]' in text
    from_lines = [ln for ln in text.splitlines() if ln.startswith("FROM ")]
    assert len(from_lines) == 2 and all("slim" in ln for ln in from_lines)
    for src in ("compatcheck", "rules", "pyproject.toml", "README.md"):
        assert (ROOT / src).exists(), f"the Dockerfile copies {src}"
    serve = subprocess.run([sys.executable, "-m", "compatcheck", "webhook", "serve", "--help"], capture_output=True,
                           text=True, cwd=ROOT)
    assert serve.returncode == 0 and "--tls-secret" in serve.stdout


def _gpu(resources: dict[str, Any]) -> dict[str, Any]:
    return {"containers": [{"name": "c", "image": "x", "resources": resources}]}


@pytest.mark.parametrize(("webhook", "obj", "sent"), [
    ("pods", {"spec": _gpu({"limits": {"nvidia.com/gpu": "1"}})}, True),
    ("pods", {"spec": _gpu({"requests": {"tencent.com/vcuda-core": "50"}})}, True),
    ("pods", {"spec": {"initContainers": [{"name": "i", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                       "containers": [{"name": "c"}]}}, True),
    ("pods", {"spec": _gpu({"limits": {"cpu": "1", "memory": "1Gi"}})}, False),
    ("pods", {"spec": {"containers": [{"name": "c"}]}}, False),
    ("workloads", {"spec": {"template": {"spec": _gpu({"limits": {"nvidia.com/mig-1g.10gb": "1"}})}}}, True),
    ("workloads", {"spec": {"template": {"spec": _gpu({})}}}, False),
    ("workloads", {"spec": {"replicas": 1}}, False),
    ("cronjobs", {"spec": {"jobTemplate": {"spec": {"template": {"spec": _gpu({"limits": {"nvidia.com/gpu": 1}})}}}}},
     True),
    ("cronjobs", {"spec": {"jobTemplate": {"spec": {}}}}, False),
    ("crl-configmaps", {"metadata": {"name": "cf-crl-g-k"}}, True),
    ("crl-configmaps", {"metadata": {"name": "x", "labels": {"features.alauda.io/type": "CustomResourceLimitation"}}},
     True),
    ("crl-configmaps", {"metadata": {"name": "settings", "labels": {"app": "x"}}}, False),
    ("crl-configmaps", {"metadata": {"name": "settings"}}, False),
])
def test_match_conditions_select_gpu_objects_and_crls(helm: str, webhook: str, obj: dict[str, Any],
                                                      sent: bool) -> None:
    """The CEL the API server runs, evaluated with a CEL implementation on real object shapes."""
    celpy = pytest.importorskip("celpy")
    (val,) = by_kind(template(helm), "ValidatingWebhookConfiguration")
    (wh,) = [w for w in val["webhooks"] if w["name"].startswith(webhook + ".")]
    env = celpy.Environment()
    (cond,) = wh["matchConditions"]
    program = env.program(env.compile(cond["expression"]))
    assert bool(program.evaluate(celpy.json_to_cel({"object": obj}))) is sent


# ---------------------------------------------------------------------------------------------- routing = the table

# The table's kinds that are cluster-scoped (every other one is namespaced).
CLUSTER_SCOPED_KINDS = {("serving.kserve.io", "ClusterServingRuntime"),
                        ("trainer.kubeflow.org", "ClusterTrainingRuntime"),
                        ("argoproj.io", "ClusterWorkflowTemplate")}
# Groups of the table that no supported API server serves: extensions/v1beta1 workloads went in Kubernetes 1.16.
# The table keeps them for old manifests in the linter; the API server sends their apps/v1 equivalents
# (matchPolicy: Equivalent). The table's rows say so too (notServed: the first tf-operator's mlkube.io).
NOT_SERVED_GROUPS = {"extensions"}


def table_routes() -> dict[tuple[str, str], str]:
    """What the chart must route, from the table (the source of truth): (group, resource) -> scope of every kind
    that carries a pod spec. Resources are the kinds' lower-case plurals (fixtures/_workloads is named by them)."""
    from compatcheck.core.dra import GROUP, REVIEWED_KINDS
    from compatcheck.io.loader import builtin_kinds

    WORKLOAD_KINDS = builtin_kinds().kinds

    routes = {(g, wk.kind.lower() + "s"): "Cluster" if (g, wk.kind) in CLUSTER_SCOPED_KINDS else "Namespaced"
              for wk in WORKLOAD_KINDS if wk.locations for g in wk.groups
              if g not in NOT_SERVED_GROUPS and g not in wk.not_served}
    # and the DRA objects the webhook reviews of its own (dra-request-unsatisfiable)
    return routes | {(GROUP, kind.lower() + "s"): "Namespaced" for kind in REVIEWED_KINDS}


def chart_routes(cfg: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    """(group, resource) -> the scopes a webhook configuration sends it for, without the CRL ConfigMap webhook."""
    out: dict[tuple[str, str], set[str]] = {}
    for wh in cfg["webhooks"]:
        if wh["name"].startswith("crl-configmaps."):
            continue
        for rule in wh["rules"]:
            assert set(rule["operations"]) == {"CREATE", "UPDATE"}, wh["name"]
            for g in rule["apiGroups"]:
                for r in rule["resources"]:
                    out.setdefault((g, r), set()).add(rule["scope"])
    return out


@pytest.mark.parametrize("kind", ["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"])
def test_webhooks_route_exactly_the_kinds_of_the_workload_table(helm: str, kind: str) -> None:
    """The chart's rules plus the webhook.customResources default: every kind the table knows a pod spec for, in
    its scope, and nothing else (a kind the table does not know would be sent for nothing)."""
    (cfg,) = by_kind(template(helm), kind)
    routes = chart_routes(cfg)
    want = table_routes()
    assert set(routes) == set(want), {"not routed": sorted(set(want) - set(routes)),
                                      "not in the table": sorted(set(routes) - set(want))}
    wrong = {k: (sorted(routes[k]), want[k]) for k in want if routes[k] not in ({want[k]}, {"*"})}
    assert wrong == {}, "routed in the wrong scope"


def _matching(cfg: dict[str, Any], obj: dict[str, Any]) -> list[dict[str, Any]]:
    from compatcheck.core.workloads import api_group

    group, resource = api_group(obj["apiVersion"]), obj["kind"].lower() + "s"
    return [wh for wh in cfg["webhooks"] if any(group in r["apiGroups"] and resource in r["resources"]
                                                for r in wh["rules"])]


def test_each_kind_reaches_one_webhook_whose_cel_sends_it(helm: str) -> None:
    """Each failing manifest of fixtures/_workloads (as the API server would receive it) is matched by exactly one
    webhook of each configuration, whose matchConditions (CEL, evaluated here with a CEL implementation) send
    it; the same object without its GPU requests is not sent where the webhook has a CEL filter."""
    celpy = pytest.importorskip("celpy")
    from tests.test_workload_kinds import WORKLOADS, load

    objs = template(helm)
    env = celpy.Environment()
    checked = 0
    for path in sorted(WORKLOADS.glob("*.yaml")):
        obj = load(path.name)
        if obj["apiVersion"].split("/")[0] in ("extensions", "mlkube.io") or path.name.startswith("inferencegraphs."):
            continue  # never served / no pod spec: not routed (test above)
        for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
            (cfg,) = by_kind(objs, kind)
            hooks = _matching(cfg, obj)
            assert len(hooks) == 1, (path.name, kind, [w["name"] for w in hooks])
            for cond in hooks[0].get("matchConditions", []):
                program = env.program(env.compile(cond["expression"]))
                assert bool(program.evaluate(celpy.json_to_cel({"object": obj}))) is True, (path.name, cond["name"])
                cpu = json.loads(json.dumps(obj).replace('"nvidia.com/gpu"', '"cpu"'))
                assert bool(program.evaluate(celpy.json_to_cel({"object": cpu}))) is False, (path.name, cond["name"])
            checked += 1
    from compatcheck.core.dra import REVIEWED_KINDS

    assert checked == 2 * (len(table_routes()) - len(REVIEWED_KINDS))  # one manifest per routed workload resource


def test_a_pod_asking_for_devices_only_through_dra_claims_is_sent(helm: str) -> None:
    """A pod spec with resourceClaims and no extended resource is sent (its GPUs may come from its claims); the
    ResourceClaims and templates themselves go to a webhook without a CEL filter."""
    celpy = pytest.importorskip("celpy")
    (cfg,) = by_kind(template(helm), "ValidatingWebhookConfiguration")
    env = celpy.Environment()
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        "containers": [{"name": "c", "image": "vllm/vllm-openai:v0.6.3", "resources": {"claims": [{"name": "gpu"}]}}]}}
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
              "spec": {"template": {"spec": pod["spec"]}}}
    for obj, sent in ((pod, True), (deploy, True), ({**pod, "spec": {**pod["spec"], "resourceClaims": []}}, False)):
        (hook,) = _matching(cfg, obj)
        (cond,) = hook["matchConditions"]
        program = env.program(env.compile(cond["expression"]))
        assert bool(program.evaluate(celpy.json_to_cel({"object": obj}))) is sent, obj
    kai = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "annotations": {"gpu-fraction": "0.5"}},
           "spec": {"containers": [{"name": "c", "image": "nvidia/cuda:13.0.2-base-ubi8"}]}}
    kai_deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": {
        "metadata": {"annotations": {"gpu-memory": "2000"}}, "spec": kai["spec"]}}}
    for obj in (kai, kai_deploy):  # KAI Scheduler's GPU sharing: the GPU is in an annotation
        (hook,) = _matching(cfg, obj)
        (cond,) = hook["matchConditions"]
        assert bool(env.program(env.compile(cond["expression"])).evaluate(celpy.json_to_cel({"object": obj})))
    for kind in ("ResourceClaim", "ResourceClaimTemplate"):
        (hook,) = _matching(cfg, {"apiVersion": "resource.k8s.io/v1", "kind": kind})
        assert hook["name"] == "resource-claims.validate.compatcheck.io" and "matchConditions" not in hook



def _with_kai_annotation(group: str, kind: str, location: Any, version: str = "v1") -> dict[str, Any]:
    """An object of ``kind`` whose only GPU is KAI's gpu-fraction annotation, where compatcheck reads it for
    ``location`` of the workload table: a template location's own metadata, else the object's (the pod spec
    there has a container with no resources). ``*`` becomes one list item (an object key for a mapping reads the
    same; a leading one, over the object's keys, one key ``any``)."""
    from compatcheck.core.pointers import split_pointer

    api_version = f"{group}/{version}" if group else version
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "kai"}}
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "nvidia/cuda:12.4.1-base-ubuntu22.04"}]}
    annotations = {"gpu-fraction": "0.5"}
    if location.shape == "template" and location.pattern:
        leaf: Any = {"metadata": {"annotations": annotations}, "spec": spec}
    else:
        obj["metadata"]["annotations"] = annotations
        leaf = spec
    tokens = split_pointer(location.pattern)
    if not tokens:  # a Pod: the object is the template
        obj["spec"] = spec
        return obj
    node: Any = obj
    for i, t in enumerate(tokens):
        last = i == len(tokens) - 1
        child: Any = leaf if last else ([{}] if tokens[i + 1] == "*" else {})
        if t == "*":
            if isinstance(node, dict):  # a wildcard over the object's own keys (Kaito's "/*/preset"): one key
                node["any"] = node = child
            elif last:  # a location that is each item of a list (Argo's "/spec/templates/*"): the item is the leaf
                node[0] = leaf
            continue
        if isinstance(node, list):
            node[0][t] = child
        else:
            node[t] = child
        node = child
    return obj


def test_kai_annotations_reach_the_webhook_for_every_kind_of_the_table(helm: str) -> None:
    """For every kind and every pod location of the workload table (the one source of truth, no second list) whose
    resource the chart routes: an object whose only GPU is KAI's gpu-fraction annotation, where compatcheck reads
    it (a Deployment's or a CronJob's pod template metadata, a PodTemplate's template metadata, a Pod's or a
    CRD's own metadata), is matched by one webhook of each configuration and sent by its CEL; compatcheck sees it
    as a GPU pod."""
    celpy = pytest.importorskip("celpy")
    from compatcheck.core.workloads import pod_targets
    from compatcheck.io.loader import builtin_kinds

    WORKLOAD_KINDS = builtin_kinds().kinds

    objs = template(helm)
    env = celpy.Environment()
    routed = table_routes()
    checked = set()
    for wk in WORKLOAD_KINDS:
        for group in wk.groups:
            if (group, wk.kind.lower() + "s") not in routed:
                continue
            for location in wk.locations:
                obj = _with_kai_annotation(group, wk.kind, location, wk.versions[0] if wk.versions else "v1")
                assert [c.implied_gpu for t in pod_targets(obj) for c in t.containers if c.implied_gpu] == [
                    {"nvidia.com/gpu": 1}], (wk.kind, location.pattern)
                for cfg_kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
                    (cfg,) = by_kind(objs, cfg_kind)
                    (hook,) = _matching(cfg, obj)
                    for cond in hook.get("matchConditions", []):
                        program = env.program(env.compile(cond["expression"]))
                        assert bool(program.evaluate(celpy.json_to_cel({"object": obj}))) is True, (
                            wk.kind, location.pattern, hook["name"])
                        del (obj["metadata"] if "annotations" in obj["metadata"] else _template_meta(obj))[
                            "annotations"]
                        assert bool(program.evaluate(celpy.json_to_cel({"object": obj}))) is False, (
                            wk.kind, location.pattern, hook["name"])
                        obj = _with_kai_annotation(group, wk.kind, location, wk.versions[0] if wk.versions else "v1")
                checked.add((group, wk.kind, location.pattern))
    assert {("batch", "CronJob", "/spec/jobTemplate/spec/template"), ("", "PodTemplate", "/template"),
            ("apps", "Deployment", "/spec/template"), ("", "Pod", "")} <= checked


def _template_meta(obj: dict[str, Any]) -> dict[str, Any]:
    """The metadata of the one pod template of an object built by ``_with_kai_annotation`` that has one."""
    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "annotations" in node.get("metadata", {}) and node is not obj:
                return node["metadata"]
            for v in node.values():
                found = walk(v)
                if found is not None:
                    return found
        if isinstance(node, list):
            for v in node:
                found = walk(v)
                if found is not None:
                    return found
        return None

    found = walk(obj)
    assert found is not None
    return found  # type: ignore[no-any-return]


def test_registry_lookups_are_on_with_the_public_allowlist_and_no_credentials(helm: str) -> None:
    from compatcheck.cli.entry import parser

    (deploy,) = by_kind(template(helm), "Deployment")
    spec = deploy["spec"]["template"]["spec"]
    ns = parser().parse_args(["webhook", "serve", *spec["containers"][0]["args"]])
    assert ns.registry_lookups is True and ns.registry_budget == 0.15
    assert ns.registry_allow is None and ns.registry_auth_file is None and ns.registry_ca is None
    assert not any(v["name"].startswith("registry-") for v in spec["volumes"])
    (off,) = by_kind(template(helm, "--set", "registry.lookups=false", "--set", "registry.pullSecret=corp-pull"),
                     "Deployment")
    off_spec = off["spec"]["template"]["spec"]
    assert parser().parse_args(["webhook", "serve", *off_spec["containers"][0]["args"]]).registry_lookups is False
    assert not any(v["name"].startswith("registry-") for v in off_spec["volumes"])


def test_the_pull_secret_is_the_one_named_mounted_by_the_kubelet_and_no_rbac_reads_secrets(helm: str) -> None:
    """Credentials for private registries come only from the Secret the values name, mounted read-only into the
    pod: the kubelet reads it, so the webhook's ServiceAccount needs (and gets) no permission on it or any other
    Secret besides its own TLS Secret (self-managed TLS)."""
    from compatcheck.cli.entry import parser

    objs = template(helm, *MODES["registry"])
    (deploy,) = by_kind(objs, "Deployment")
    spec = deploy["spec"]["template"]["spec"]
    container = spec["containers"][0]
    ns = parser().parse_args(["webhook", "serve", *container["args"]])
    assert ns.registry_allow == ["registry.corp", "*.corp.example", "registry.corp:5000"]
    assert ns.registry_redirect_host == ["blobs.corp.example"] and ns.registry_budget == 0.25
    assert ns.registry_auth_file == "/etc/compatcheck/registry-auth/config.json"
    assert ns.registry_ca == "/etc/compatcheck/registry-ca/ca.crt"
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["registry-auth"]["secret"] == {"secretName": "corp-pull", "defaultMode": 0o400,
                                                  "items": [{"key": ".dockerconfigjson", "path": "config.json"}]}
    assert volumes["registry-ca"]["configMap"] == {"name": "corp-ca", "items": [{"key": "ca.crt", "path": "ca.crt"}]}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["registry-auth"] == {"name": "registry-auth", "mountPath": "/etc/compatcheck/registry-auth",
                                       "readOnly": True}
    assert mounts["registry-ca"]["readOnly"] is True
    secret_rules = [r for o in objs if o["kind"] in ("Role", "ClusterRole") for r in o["rules"]
                    if "secrets" in r["resources"]]
    assert secret_rules == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
                            {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["cc-compatcheck-tls"],
                             "verbs": ["get", "update"]}]
    assert "corp-pull" not in json.dumps([o for o in objs if o["kind"] != "Deployment"])


def test_the_data_source_is_rendered_into_the_config_with_a_cache_and_the_pull_secret(helm: str,
                                                                                       tmp_path: Path) -> None:
    """data.source: the config's data section (the webhook pulls it), a writable cache directory for the bundles
    (the root filesystem is read-only), and the registry's pull secret and CA even with image lookups off."""
    from compatcheck.cli.entry import parser
    from compatcheck.core.config import DataSettings
    from compatcheck.io.config import load_config

    ref = "registry.corp:5000/compatcheck/data:stable"
    objs = template(helm, "--set", f"data.source={ref}", "--set", "data.refreshInterval=30m",
                    "--set", "registry.lookups=false", "--set", "registry.pullSecret=corp-pull",
                    "--set", "registry.caConfigMap=corp-ca")
    cm = next(o for o in by_kind(objs, "ConfigMap") if o["metadata"]["name"].endswith("-config"))
    (tmp_path / "config.yaml").write_text(cm["data"]["config.yaml"])
    assert load_config(str(tmp_path / "config.yaml")).data == DataSettings(None, ref, 1800.0)
    (deploy,) = by_kind(objs, "Deployment")
    spec = deploy["spec"]["template"]["spec"]
    container = spec["containers"][0]
    ns = parser().parse_args(["webhook", "serve", *container["args"]])
    assert (ns.registry_lookups, ns.registry_auth_file, ns.registry_ca) == (
        False, "/etc/compatcheck/registry-auth/config.json", "/etc/compatcheck/registry-ca/ca.crt")
    assert {"name": "COMPATCHECK_CACHE_DIR", "value": "/var/cache/compatcheck"} in container["env"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["data-cache"] == {"name": "data-cache", "emptyDir": {"sizeLimit": "256Mi"}}
    assert volumes["registry-auth"]["secret"]["secretName"] == "corp-pull"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert (mounts["data-cache"], mounts["registry-auth"]) == ("/var/cache/compatcheck",
                                                               "/etc/compatcheck/registry-auth")
    # without a source: no data section, no cache volume, no credentials mounted for nothing
    (plain,) = by_kind(template(helm, "--set", "registry.lookups=false", "--set", "registry.pullSecret=corp-pull"),
                       "Deployment")
    assert "data-cache" not in json.dumps(plain) and "registry-auth" not in json.dumps(plain)
