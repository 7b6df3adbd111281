"""policy: who declares a relaxation of "driver >= runtime" for a pool (its label, else the config) and how a
policy label's value is read; drakinds: which objects are DRA objects, the note for an API version Kubernetes does
not serve by default, and whether a pod spec names claims."""

from __future__ import annotations

from typing import Any

import pytest

from compatcheck.core.drakinds import api_version_note, has_claims, is_dra
from compatcheck.core.model import Severity
from compatcheck.core.policy import DEFAULT_POLICY, Declared, DriverPolicy, Relaxation, parse_flag


@pytest.mark.parametrize(("policy", "relaxation", "pool", "expected"), [
    (DEFAULT_POLICY, "forward", None, Declared(False, "config")),
    (DEFAULT_POLICY, "minor-version", None, Declared(False, "config")),
    (DriverPolicy(forward_compatibility=True), "forward", None, Declared(True, "config")),
    (DriverPolicy(forward_compatibility=True), "minor-version", None, Declared(False, "config")),
    (DriverPolicy(minor_version_compatibility=True), "minor-version", None, Declared(True, "config")),
    (DriverPolicy(minor_version_compatibility=True), "forward", None, Declared(False, "config")),
    (DriverPolicy(forward_compatibility=True), "forward", False, Declared(False, "label")),
    (DEFAULT_POLICY, "minor-version", True, Declared(True, "label")),
    (DEFAULT_POLICY, "forward", True, Declared(True, "label")),
])
def test_a_pools_label_overrides_the_config(policy: DriverPolicy, relaxation: Relaxation, pool: bool | None,
                                            expected: Declared) -> None:
    assert policy.declared(relaxation, pool) == expected


def test_the_default_policy_declares_nothing() -> None:
    assert (DEFAULT_POLICY.forward_compatibility, DEFAULT_POLICY.minor_version_compatibility,
            DEFAULT_POLICY.assumed_severity) == (False, False, None)
    assert DriverPolicy(assumed_severity=Severity.WARNING).assumed_severity is Severity.WARNING


@pytest.mark.parametrize(("value", "flag"), [
    ("true", True), ("True", True), (" TRUE\t", True), ("false", False), ("FALSE", False), ("  false ", False),
    ("", None), ("yes", None), ("1", None), ("t rue", None), ("truex", None),
])
def test_a_policy_labels_value(value: str, flag: bool | None) -> None:
    assert parse_flag(value) is flag


# ------------------------------------------------------------------------------------------------ drakinds

@pytest.mark.parametrize(("obj", "dra"), [
    ({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim"}, True),
    ({"apiVersion": "resource.k8s.io/v1beta1", "kind": "DeviceClass"}, True),
    ({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice"}, True),
    ({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate"}, True),
    ({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule"}, False),
    ({"apiVersion": "resource.k8s.io", "kind": "ResourceClaim"}, False),
    ({"apiVersion": "v1", "kind": "ResourceClaim"}, False),
])
def test_dra_objects(obj: dict[str, Any], dra: bool) -> None:
    assert is_dra(obj) is dra


@pytest.mark.parametrize(("obj", "note"), [
    ({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim"}, None),
    ({"apiVersion": "resource.k8s.io/v9", "kind": "ResourceClaim"}, None),
    ({"apiVersion": 3, "kind": "ResourceClaim"}, None),
    ({"kind": "ResourceClaim"}, None),
    ({"apiVersion": "other.io/v1beta1", "kind": "ResourceClaim"}, None),
    ({"apiVersion": "resource.k8s.io.evil/v1beta1", "kind": "ResourceClaim"}, None),
    ({"apiVersion": "resource.k8s.io/v1beta2", "kind": "DeviceClass"},
     "DeviceClass of resource.k8s.io/v1beta2 is deprecated in Kubernetes 1.36+ and unavailable in 1.39+ (1.36 serves "
     "it only with --runtime-config): read as v1, apply it as resource.k8s.io/v1"),
    ({"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaim"},
     "ResourceClaim of resource.k8s.io/v1beta1 is deprecated in Kubernetes 1.35+ and unavailable in 1.38+ (1.36 "
     "serves it only with --runtime-config): read as v1, apply it as resource.k8s.io/v1"),
    ({"apiVersion": "resource.k8s.io/v1alpha3"},
     "an object of resource.k8s.io/v1alpha3 (Kubernetes 1.31) is no longer served (1.36 serves v1alpha3 only for "
     "DeviceTaintRule and ResourcePoolStatusRequest): read as v1beta1, apply it as resource.k8s.io/v1"),
    ({"apiVersion": "resource.k8s.io/v1alpha2", "kind": 7},
     "an object of resource.k8s.io/v1alpha2 (the \"classic\" DRA API) is not served since Kubernetes 1.31: not "
     "checked"),
    ({"apiVersion": "resource.k8s.io/v1alpha2/extra", "kind": "ResourceClass"}, None),
    ({"apiVersion": "resource.k8s.io/x/v1beta1", "kind": "ResourceClaim"}, None),
])
def test_the_note_for_an_api_version_not_served_by_default(obj: dict[str, Any], note: str | None) -> None:
    assert api_version_note(obj) == note


@pytest.mark.parametrize(("spec", "claims"), [
    ({"resourceClaims": []}, True), ({"draResources": None}, True), ({"containers": []}, False), ({}, False),
])
def test_a_pod_spec_names_claims(spec: dict[str, Any], claims: bool) -> None:
    assert has_claims(spec) is claims
