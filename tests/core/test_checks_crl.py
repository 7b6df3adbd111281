"""checks/crl.py and checks/meta.py: the CRL policies a container is held to for every key of a group it uses, with
exact findings and safe fixes, and suppressions without a reason."""

from __future__ import annotations

from typing import Any

import pytest

from compatcheck.core.crl import CrlIndex, CrlKey
from compatcheck.core.model import Applicability, Fix, PatchOp
from tests.core.helpers import container, found, pod

CORE, MEMORY = "tencent.com/vcuda-core", "tencent.com/vcuda-memory"
RES = "/spec/containers/0/resources"
SRC = "(CRL group gpu, ConfigMap cm-{key})"


def index(*keys: tuple[str, str, str | None, str, str]) -> CrlIndex:
    out = CrlIndex()
    for key, data_type, default, limits, requests in keys:
        out.add(CrlKey(key, data_type, default, limits, requests, "gpu", f"cm-{key.split('/')[-1]}"))  # type: ignore[arg-type]
    out.add(CrlKey("other.io/x", "integer", "1", "required", "required", "other", "cm-x"))
    return out


def crl(check: str, resources: dict[str, Any], *keys: tuple[str, str, str | None, str, str]) -> list[Any]:
    return found(check, pod(container(gpus=None, resources=resources)), crl=index(*keys))


def lim(key: str) -> str:
    return f"{RES}/limits/{key.replace('/', '~1')}"


def req(key: str) -> str:
    return f"{RES}/requests/{key.replace('/', '~1')}"


def src(key: str) -> str:
    return SRC.format(key=key.split("/")[-1])


def safe(description: str, *ops: PatchOp) -> Fix:
    return Fix(description, Applicability.SAFE, ops)


@pytest.mark.parametrize(("resources", "keys", "expected"), [
    ({"limits": {CORE: 50}}, [(CORE, "integer", None, "required", "required"),
                              (MEMORY, "integer", "8", "required", "fromLimits")],
     [(lim(MEMORY), f"limits.{MEMORY} is required because the container uses gpu resources {src(MEMORY)}",
       safe(f"set limits.{MEMORY} to the CRL default 8", PatchOp("add", lim(MEMORY), "8")))]),
    ({"requests": {CORE: 50}}, [(CORE, "integer", None, "required", "required")],
     [(lim(CORE), f"limits.{CORE} is required because the container uses gpu resources {src(CORE)}", None)]),
    ({}, [(CORE, "integer", "1", "required", "required")], []),  # uses no key of the group
    ({"limits": {"cpu": 1}}, [(CORE, "integer", "1", "optional", "required")], []),
])
def test_crl_limit_required(resources: dict[str, Any], keys: list[Any], expected: list[Any]) -> None:
    assert crl("crl-limit-required", resources, *keys) == [(p, "c", m, f) for p, m, f in expected]


def test_crl_limit_required_adds_a_missing_resources_map() -> None:
    obj = pod(container(gpus=None, resources={"requests": {CORE: 1}}))
    ((_p, _c, _m, fix),) = found("crl-limit-required", obj, crl=index((CORE, "integer", "100", "required", "required")))
    assert fix == safe(f"set limits.{CORE} to the CRL default 100", PatchOp("add", f"{RES}/limits", {CORE: "100"}))


@pytest.mark.parametrize(("resources", "expected"), [
    ({"limits": {CORE: 50, MEMORY: 1}}, [(lim(MEMORY), f"limits.{MEMORY} is not allowed {src(MEMORY)}")]),
    ({"limits": {CORE: 50}}, []),
])
def test_crl_limit_disabled(resources: dict[str, Any], expected: list[Any]) -> None:
    keys = [(CORE, "integer", None, "required", "required"), (MEMORY, "integer", None, "disabled", "disabled")]
    assert crl("crl-limit-disabled", resources, *keys) == [(p, "c", m, None) for p, m in expected]


@pytest.mark.parametrize(("resources", "policy", "expected"), [
    ({"limits": {CORE: 1}, "requests": {CORE: 1}}, "disabled", [(req(CORE), f"requests.{CORE} is not allowed "
                                                                            f"{src(CORE)}", None)]),
    ({"limits": {CORE: 1}}, "disabled", []),
    ({"limits": {CORE: 1}}, "required", [(req(CORE), f"requests.{CORE} is required {src(CORE)}", None)]),
    ({"limits": {CORE: 1}, "requests": {CORE: 1}}, "required", []),
    ({"limits": {CORE: "2"}, "requests": {CORE: 1}}, "fromLimits", [
        (req(CORE), f"requests.{CORE} 1 must equal limits.{CORE} 2 (policy fromLimits) {src(CORE)}",
         safe(f"set requests.{CORE} from limits", PatchOp("replace", req(CORE), "2")))]),
    ({"limits": {CORE: "1"}, "requests": {CORE: 1}}, "fromLimits", []),
    ({"requests": {CORE: 1}}, "fromLimits", []),
    ({"limits": {CORE: 1}}, "fromLimits", []),
])
def test_crl_request_policy(resources: dict[str, Any], policy: str, expected: list[Any]) -> None:
    assert crl("crl-request-policy", resources, (CORE, "integer", None, "optional", policy)) == [
        (p, "c", m, f) for p, m, f in expected]


@pytest.mark.parametrize(("resources", "spec", "expected"), [
    ({"limits": {MEMORY: 1}}, (CORE, "integer", "100", "optional", "fromLimits"), [
        (lim(CORE), f"limits.{CORE} is not set; the CRL default is 100 {src(CORE)}",
         safe(f"set limits.{CORE} to the CRL default 100 (and requests, policy fromLimits)",
              PatchOp("add", lim(CORE), "100"), PatchOp("add", f"{RES}/requests", {CORE: "100"})))]),
    ({"limits": {MEMORY: 1}, "requests": {CORE: 50}}, (CORE, "integer", "100", "optional", "fromLimits"), [
        (lim(CORE), f"limits.{CORE} is not set; the CRL default is 100 {src(CORE)}",
         safe(f"set limits.{CORE} to the CRL default 100", PatchOp("add", lim(CORE), "100")))]),
    ({"limits": {MEMORY: 1}}, (CORE, "integer", "100", "optional", "required"), [
        (lim(CORE), f"limits.{CORE} is not set; the CRL default is 100 {src(CORE)}",
         safe(f"set limits.{CORE} to the CRL default 100", PatchOp("add", lim(CORE), "100")))]),
    ({"requests": {MEMORY: 1}}, (CORE, "integer", "100", "optional", "required"), [
        (lim(CORE), f"limits.{CORE} is not set; the CRL default is 100 {src(CORE)}",
         safe(f"set limits.{CORE} to the CRL default 100", PatchOp("add", f"{RES}/limits", {CORE: "100"})))]),
    ({"limits": {MEMORY: 1}}, (CORE, "integer", None, "optional", "fromLimits"), []),
    ({"limits": {MEMORY: 1}}, (CORE, "integer", "100", "required", "fromLimits"), []),  # crl-limit-required's
    ({"limits": {CORE: 7, MEMORY: 1}}, (CORE, "integer", "100", "optional", "fromLimits"), [
        (req(CORE), f"requests.{CORE} is not set; policy fromLimits sets it to 7 {src(CORE)}",
         safe(f"set requests.{CORE} from limits", PatchOp("add", f"{RES}/requests", {CORE: 7})))]),
    ({"limits": {CORE: 7}, "requests": {MEMORY: 1}}, (CORE, "integer", None, "required", "fromLimits"), [
        (req(CORE), f"requests.{CORE} is not set; policy fromLimits sets it to 7 {src(CORE)}",
         safe(f"set requests.{CORE} from limits", PatchOp("add", req(CORE), 7)))]),
    ({"limits": {CORE: 7}}, (CORE, "integer", None, "required", "required"), []),
    ({"limits": {CORE: 7}, "requests": {CORE: 7}}, (CORE, "integer", None, "required", "fromLimits"), []),
])
def test_crl_defaults(resources: dict[str, Any], spec: Any, expected: list[Any]) -> None:
    keys = [spec, (MEMORY, "integer", None, "optional", "required")]
    assert crl("crl-defaults", resources, *keys) == [(p, "c", m, f) for p, m, f in expected]


@pytest.mark.parametrize(("resources", "expected"), [
    ({"limits": {CORE: "x"}, "requests": {CORE: "1.5"}}, [
        (lim(CORE), f"limits.{CORE} 'x' is not a valid integer {src(CORE)}"),
        (req(CORE), f"requests.{CORE} '1.5' is not a valid integer {src(CORE)}")]),
    ({"limits": {CORE: 3}, "requests": {CORE: "4"}}, []),
    ({"limits": {MEMORY: "1Gi"}}, []),
    ({"requests": {MEMORY: "lots"}}, [
        (req(MEMORY), f"requests.{MEMORY} 'lots' is not a valid quantity {src(MEMORY)}")]),
])
def test_crl_value_type(resources: dict[str, Any], expected: list[Any]) -> None:
    keys = [(CORE, "integer", None, "optional", "required"), (MEMORY, "quantity", None, "optional", "required")]
    assert crl("crl-value-type", resources, *keys) == [(p, "c", m, None) for p, m in expected]


def test_crl_checks_read_requests_too_and_every_container() -> None:
    obj = pod(container("a", gpus=None, resources={"requests": {MEMORY: 1}}), container("b", gpus=None),
              container("d", gpus=None, resources={"limits": {MEMORY: 2}}))
    keys = index((CORE, "integer", None, "required", "required"), (MEMORY, "integer", None, "optional", "required"))
    assert [(p, c) for p, c, _m, _f in found("crl-limit-required", obj, crl=keys)] == [
        (lim(CORE), "a"), (lim(CORE).replace("/0/", "/2/"), "d")]


def test_without_crls_nothing_is_checked() -> None:
    assert found("crl-limit-required", pod(container(resources={"limits": {CORE: 1}}))) == []


# ---------------------------------------------------------------------------------------- suppressions


def test_suppressions_without_a_reason() -> None:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "annotations": {
        "compatcheck.io/ignore": "rule-a, rule-b=known"}}, "spec": {"template": {"metadata": {"annotations": {
            "compatcheck.io/ignore.main": "rule-c"}}, "spec": {"containers": [{"name": "main"}]}}}}
    assert found("suppression-annotations", deployment) == [
        ("/metadata/annotations/compatcheck.io~1ignore", None,
         'suppression of rule-a has no reason: write compatcheck.io/ignore: "rule-a=<why>"', None),
        ("/spec/template/metadata/annotations/compatcheck.io~1ignore.main", "main",
         "suppression of rule-c for container 'main' has no reason: write compatcheck.io/ignore.main: "
         '"rule-c=<why>"', None)]
