"""compatcheck reads YAML as kubectl and the API server do (issue #15), proved against the real ones: for a table
of plain scalars, what ``kubectl apply --dry-run=server`` accepts or rejects is what compatcheck reports, values
the server stores are the values compatcheck lints, and a duplicate key is accepted with the last value winning
(which compatcheck lints, and reports as ``yaml-duplicate-key``)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from compatcheck.io.manifests import parse_text
from tests.conftest import ROOT
from tests.e2e.conftest import namespace
from tests.e2e.kapi import KubeAPIServer

# Plain scalars written as an annotation value (a string field that takes any string). A YAML 1.1 boolean or a number
# is rejected.
SCALARS = ["on", "On", "ON", "oN", "yes", "Yes", "YES", "yES", "y", "Y", "n", "N", "no", "NO", "off", "Off",
           "true", "TRUE", "tRUE", "false", "~", "0755", "0o17", "0x1F", "0b101", "1_000", "08", "12.4", ".5", "1e3",
           "1:20", "2001-12-14", "535.104.05", "v1", "-1", "+.inf"]
# Plain scalars written as an integer field: the number the API server stores is the number compatcheck reads.
NUMBERS = ["0755", "0o17", "0x1F", "0b101", "1_000", "08", "+30", "1e1"]


def pod(name: str, note: str = "x", selector: str = "x", grace: str = "30",
        image_lines: str = "  - name: c\n    image: x\n") -> str:
    return (f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  annotations:\n    note: {note}\nspec:\n"
            f"  terminationGracePeriodSeconds: {grace}\n  nodeSelector:\n    gpu: {selector}\n"
            f"  containers:\n{image_lines}")


@pytest.fixture(scope="module")
def ns(kapi: KubeAPIServer) -> Iterator[str]:
    yield namespace(kapi.client(), "yaml")


def server_dry_run(kapi: KubeAPIServer, ns: str, text: str) -> tuple[bool, dict[str, Any] | str]:
    out = kapi.kubectl("apply", "--dry-run=server", "-n", ns, "-o", "json", "-f", "-", stdin=text, check=False)
    return (True, json.loads(out.stdout)) if out.returncode == 0 else (False, out.stderr.strip())


def lint(text: str) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "compatcheck", "lint", "-", "--format", "json"], input=text,
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def test_scalars_in_a_string_field_are_accepted_exactly_where_compatcheck_says(kapi: KubeAPIServer, ns: str) -> None:
    differ = []
    for i, scalar in enumerate(SCALARS):
        text = pod(f"s{i}", note=scalar)
        accepted, server = server_dry_run(kapi, ns, text)
        reported = [f for f in lint(text)["findings"] if f["rule"] == "yaml-non-string-value"]
        (doc,) = parse_text("p.yaml", text).documents
        ours = doc.data["metadata"]["annotations"]["note"]
        if accepted == bool(reported):
            differ.append((scalar, "accepted" if accepted else f"rejected: {server}", reported))
        elif accepted:
            assert isinstance(server, dict)
            stored = server["metadata"].get("annotations", {}).get("note")
            if stored != ("" if ours is None else ours):  # null in a string map is stored as ""
                differ.append((scalar, f"stored {stored!r}", f"compatcheck read {ours!r}"))
    assert differ == [], "\n".join(map(str, differ))


def test_gpu_on_in_a_node_selector(kapi: KubeAPIServer, ns: str) -> None:
    text = pod("sel", selector="on")
    accepted, server = server_dry_run(kapi, ns, text)
    assert not accepted and "cannot unmarshal bool into Go struct field PodSpec.spec.nodeSelector of type string" \
        in str(server)
    (bad,) = [f for f in lint(text)["findings"] if f["rule"] == "yaml-non-string-value"]
    assert (bad["pointer"], bad["line"]) == ("/spec/nodeSelector/gpu", 10)


@pytest.mark.parametrize("number", NUMBERS)
def test_numbers_are_the_numbers_the_api_server_stores(kapi: KubeAPIServer, ns: str, number: str) -> None:
    text = pod(f"n{NUMBERS.index(number)}", grace=number)
    accepted, server = server_dry_run(kapi, ns, text)
    assert accepted, server
    assert isinstance(server, dict)
    (doc,) = parse_text("p.yaml", text).documents
    assert server["spec"]["terminationGracePeriodSeconds"] == doc.data["spec"]["terminationGracePeriodSeconds"]


def test_a_duplicate_key_is_accepted_and_the_last_one_wins(kapi: KubeAPIServer, ns: str) -> None:
    text = pod("dup", image_lines="  - name: c\n    image: first:1\n    image: nvidia/cuda:12.4.1-base-ubuntu22.04\n")
    accepted, server = server_dry_run(kapi, ns, text)
    assert accepted, server
    assert isinstance(server, dict)
    (doc,) = parse_text("p.yaml", text).documents
    assert server["spec"]["containers"][0]["image"] == doc.data["spec"]["containers"][0]["image"] == \
        "nvidia/cuda:12.4.1-base-ubuntu22.04"
    (dup,) = [f for f in lint(text)["findings"] if f["rule"] == "yaml-duplicate-key"]
    assert (dup["pointer"], dup["line"]) == ("/spec/containers/0/image", 14)
    assert "(lines 13 and 14)" in dup["message"]


def gpu_pod(name: str, count: str) -> str:
    return (f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: c\n    image: x\n"
            f"    resources:\n      limits:\n        nvidia.com/gpu: {count}\n")


# GPU counts past 2^63, as written in a manifest -> (does the API server accept it, compatcheck's message ends with).
HUGE = [("1" + "0" * 32, True, "1e+32 is more than any node offers (past 2^63): the API server may even accept it, "
                               "but the pod can never be scheduled"),
        ('"1e21"', True, "1e21 is more than any node offers (past 2^63): the API server may even accept it, but the "
                         "pod can never be scheduled"),
        ('"' + "1" * 40 + '"', False, "1" * 40 + " is more than any node offers (past 2^63): the API server may even "
                                      "accept it, but the pod can never be scheduled"),
        ("-1e400", False, "-1e400 must be greater than or equal to 0"),
        ("1e400", True, "1e400 is more than any node offers (past 2^63): the API server may even accept it, but the "
                        "pod can never be scheduled")]


def test_gpu_counts_past_int64_are_errors_whatever_the_server_makes_of_them(kapi: KubeAPIServer, ns: str) -> None:
    got = []
    for i, (count, _, _) in enumerate(HUGE):
        text = gpu_pod(f"huge{i}", count)
        accepted, _server = server_dry_run(kapi, ns, text)
        messages = [f["message"] for f in lint(text)["findings"] if f["rule"] == "extended-resource-invalid"]
        got.append((count, accepted, messages[0].split(": ", 1)[1] if messages else None))
    assert got == HUGE
