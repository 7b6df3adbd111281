"""Structured logs for the webhook: one JSON object per line on stderr.

Call sites pass their fields as data (``log_event``); the formatter serialises each record once. It must not
parse messages back: the admission path logs every request, so a dumps-then-loads round trip per line is
pure cost.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from compatcheck.core.jsonutil import dumps

TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"


def log_event(logger: logging.Logger, level: int, msg: str, **fields: Any) -> None:
    """Log ``msg`` with ``fields`` as top-level JSON keys (nothing is built when the level is off)."""
    if logger.isEnabledFor(level):
        logger.log(level, msg, extra={"fields": fields})


def _line(stamp: str, level: str, logger: str, msg: str, fields: dict[str, Any]) -> str:
    return dumps({"time": stamp, "level": level, "logger": logger, "msg": msg, **fields}).decode()


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return _line(self.formatTime(record, TIME_FORMAT), record.levelname.lower(), record.name,
                     record.getMessage(), getattr(record, "fields", {}))


class DecisionLog:
    """The one-line-per-admission-decision log, written straight to the JSON handler's stream in
    JsonFormatter's format.

    It is the hottest line in the process. Through ``logging`` it costs ~27 us (record creation, the
    caller lookup, strftime, two locks), a quarter of a cached review; written here it costs a few. The
    level, the handler (and its lock, so lines from watch threads never interleave) and the format are
    still those of the logging setup; without a JSON handler (library use) it falls back to the logger.
    Inside an event loop, the lines of one loop iteration go out in one write, at the end of that
    iteration (under load, one syscall for several requests); ``flush`` writes what is pending now.
    """

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger
        self._second = -1
        self._stamp = ""
        self._pending: list[str] = []
        self._pending_handler: logging.StreamHandler[Any] | None = None

    def _json_handler(self) -> logging.StreamHandler[Any] | None:
        lg: logging.Logger | None = self.logger
        while lg is not None:
            for h in lg.handlers:
                if isinstance(h, logging.StreamHandler) and isinstance(h.formatter, JsonFormatter):
                    return h
            lg = lg.parent if lg.propagate else None
        return None

    def info(self, msg: str, **fields: Any) -> None:
        if not self.logger.isEnabledFor(logging.INFO):
            return
        handler = self._json_handler()
        if handler is None:
            log_event(self.logger, logging.INFO, msg, **fields)
            return
        now = int(time.time())
        if now != self._second:  # one strftime per second, not per line
            self._second, self._stamp = now, time.strftime(TIME_FORMAT, time.localtime(now))
        line = _line(self._stamp, "info", self.logger.name, msg, fields) + handler.terminator
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            _write(handler, line)
            return
        if self._pending and handler is not self._pending_handler:
            self.flush()
        if not self._pending:
            loop.call_soon(self.flush)
            self._pending_handler = handler
        self._pending.append(line)

    def flush(self) -> None:
        if self._pending and self._pending_handler is not None:
            text, self._pending = "".join(self._pending), []
            _write(self._pending_handler, text)


def _write(handler: logging.StreamHandler[Any], text: str) -> None:
    handler.acquire()
    try:
        handler.stream.write(text)
        handler.stream.flush()
    except Exception:  # like logging: a broken stderr must not fail the admission answer
        pass
    finally:
        handler.release()


def json_logging(level: int = logging.INFO) -> None:
    """Route the ``compatcheck`` loggers to stderr as JSON lines."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger("compatcheck")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
