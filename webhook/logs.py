"""Structured logs for the webhook: one JSON object per line on stderr.

Call sites pass their fields as data (``log_event``); the formatter serialises each record once. It must not
parse messages back: the admission path logs every request, so a dumps-then-loads round trip per line is
pure cost.
"""

from __future__ import annotations

import json
import logging
from typing import Any


def log_event(logger: logging.Logger, level: int, msg: str, **fields: Any) -> None:
    """Log ``msg`` with ``fields`` as top-level JSON keys (nothing is built when the level is off)."""
    if logger.isEnabledFor(level):
        logger.log(level, msg, extra={"fields": fields})


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return json.dumps({"time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"), "level": record.levelname.lower(),
                           "logger": record.name, "msg": record.getMessage(), **getattr(record, "fields", {})})


def json_logging(level: int = logging.INFO) -> None:
    """Route the ``compatcheck`` loggers to stderr as JSON lines."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger("compatcheck")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
