"""The decision log fast path: same lines as the logging setup would write, batched per loop iteration."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator

import pytest

from compatcheck.webhook.logs import DecisionLog, JsonFormatter, log_event


class CountingStream(io.StringIO):
    writes = 0

    def write(self, s: str) -> int:
        self.writes += 1
        return super().write(s)


@pytest.fixture
def logger() -> Iterator[tuple[logging.Logger, CountingStream]]:
    lg = logging.getLogger("compatcheck.test-decisions")
    stream = CountingStream()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    lg.handlers[:] = [handler]
    lg.setLevel(logging.INFO)
    lg.propagate = False
    yield lg, stream
    lg.handlers[:] = []


def test_same_line_shape_as_the_formatter(logger: tuple[logging.Logger, CountingStream]) -> None:
    lg, stream = logger
    DecisionLog(lg).info("admission", uid="u1", allowed=False, rules=["a", "b"], durationMs=1.5)
    log_event(lg, logging.INFO, "admission", uid="u1", allowed=False, rules=["a", "b"], durationMs=1.5)
    fast, slow = (json.loads(line) for line in stream.getvalue().splitlines())
    assert fast.keys() == slow.keys() and fast.pop("time")[:13] == slow.pop("time")[:13]
    assert fast == slow == {"level": "info", "logger": lg.name, "msg": "admission", "uid": "u1", "allowed": False,
                            "rules": ["a", "b"], "durationMs": 1.5}


def test_lines_of_one_loop_iteration_go_out_in_one_write(logger: tuple[logging.Logger, CountingStream]) -> None:
    lg, stream = logger
    log = DecisionLog(lg)

    async def main() -> tuple[str, int]:
        for i in range(3):
            log.info("admission", uid=f"u{i}")
        before = stream.getvalue()
        await asyncio.sleep(0)
        return before, stream.writes

    before, writes = asyncio.run(main())
    assert before == "" and writes == 1
    assert [json.loads(line)["uid"] for line in stream.getvalue().splitlines()] == ["u0", "u1", "u2"]


def test_level_and_fallback(logger: tuple[logging.Logger, CountingStream], caplog: pytest.LogCaptureFixture) -> None:
    lg, stream = logger
    lg.setLevel(logging.WARNING)
    DecisionLog(lg).info("admission", uid="quiet")
    assert stream.getvalue() == ""
    plain = logging.getLogger("compatcheck.test-plain")  # no JSON handler: through logging as usual
    plain.setLevel(logging.INFO)
    with caplog.at_level(logging.INFO, logger=plain.name):
        DecisionLog(plain).info("admission", uid="u9")
    assert [r.fields for r in caplog.records if r.name == plain.name] == [{"uid": "u9"}]  # type: ignore[attr-defined]
