"""A registry that answers 429 or 5xx is retried with backoff (honouring Retry-After) and, when it keeps failing,
is one note; a redirect or a token realm on a host the policy does not allow is never followed (a listening socket
records that no connection came). The registry is the real one, behind ``harness.Front`` where an answer the real
registry cannot give on demand is needed."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.registry.conftest import TOO_OLD_13, Images, short
from tests.registry.harness import Front, Listener


@pytest.fixture
def as_front(tmp_path: Path, basic: Images, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Make a Front to the basic registry, with the reader's credentials for the front's host."""
    fronts: list[Front] = []

    def make(**script: Any) -> Front:
        front = Front(basic.registry.ca, basic.registry.host, **script)
        fronts.append(front)
        auth = json.loads((basic.docker_config / "config.json").read_text())["auths"][basic.registry.host]
        d = tmp_path / f"docker-{front.port}"
        d.mkdir()
        (d / "config.json").write_text(json.dumps({"auths": {front.host: auth}}))
        monkeypatch.setenv("DOCKER_CONFIG", str(d))
        return front

    yield make
    for f in fronts:
        f.close()


def test_503_then_429_are_retried_with_backoff_and_retry_after(lint: Any, basic: Images, as_front: Any) -> None:
    front = as_front(failures=[503, 429], retry_after="1")
    image = f"{front.host}/ml/serving:2025-10-14"
    run = lint(image, "--registry-lookups")
    assert run.findings == [("cuda-driver-too-old", "/spec/containers/0/image",
                             TOO_OLD_13.format(image=image, digest=short(basic.serving.digest)))]
    assert run.notes == []
    manifests = [(status, t) for _m, path, status, t in front.log if "/manifests/" in path]
    assert [s for s, _t in manifests][:3] == [503, 429, 401]  # then the Basic challenge, answered
    assert manifests[1][1] - manifests[0][1] >= 0.9  # Retry-After: 1 honoured (it overrides the 0.2 s backoff)
    assert manifests[2][1] - manifests[1][1] >= 0.9


def test_a_registry_that_keeps_failing_is_one_note_after_three_tries(lint: Any, basic: Images,
                                                                     as_front: Any) -> None:
    front = as_front(always=503)
    image = f"{front.host}/ml/serving:2025-10-14"
    started = time.monotonic()
    run = lint(image, "--registry-lookups")
    assert run.notes == [f"registry lookup: {image}: {front.host} answered 503 3 times"]
    assert front.statuses("manifests") == [503, 503, 503]
    assert 0.6 - 0.05 <= time.monotonic() - started < 5  # backoff 0.2 s then 0.4 s
    assert [r for r, _p, _m in run.findings] == ["cuda-runtime-unknown"]


def test_a_retry_after_past_the_budget_gives_up_at_once(lint: Any, as_front: Any) -> None:
    front = as_front(failures=[429], retry_after="60")
    image = f"{front.host}/ml/serving:2025-10-14"
    started = time.monotonic()
    run = lint(image, "--registry-lookups", config={"budgetSeconds": 5})
    assert run.notes == [f"registry lookup: {front.host} asked to retry after 60 s, past the lookup budget; not "
                         f"read: {image}"]
    assert time.monotonic() - started < 3 and front.statuses("manifests") == [429]


def test_a_blob_redirect_to_a_host_off_the_allowlist_is_not_followed(lint: Any, as_front: Any) -> None:
    rec = Listener("record")
    try:
        front = as_front(redirect_blobs=rec.host)
        image = f"{front.host}/ml/serving:2025-10-14"
        run = lint(image, "--registry-lookups", config={"allow": [front.host]})
        assert run.notes == [f"registry lookup: {front.host} redirected to {rec.host}, which is not an allowed host "
                             f"(registry.redirectHosts); not read: {image}"]
        assert rec.connections == 0
        # Named in redirectHosts, the same redirect is followed (and the recorder, no registry, closes it).
        again = lint(image, "--registry-lookups", config={"allow": [front.host], "redirectHosts": [rec.host]})
        assert rec.connections >= 1 and len(again.notes) == 1 and rec.host in again.notes[0]
    finally:
        rec.close()


def test_a_token_realm_off_the_allowlist_gets_no_request(lint: Any, token: Images, token_server: Any,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_CONFIG", str(token.docker_config))
    before = token_server.requests
    image = token.ref("ml/serving:2025-10-14")
    run = lint(image, "--registry-lookups", config={"allow": [token.registry.host], "redirectHosts": []})
    realm = token_server.realm.split("/")[2]
    assert run.notes == [f"registry lookup: {token.registry.host} names a token realm on {realm}, which is not an "
                         f"allowed host (registry.redirectHosts); not read: {image}"]
    assert token_server.requests == before
