"""The methods ``dataclasses`` writes for each class, compiled once per install instead of on every start.

``@dataclass`` writes the source of a class's ``__init__``, ``__repr__``, ``__eq__``, ``__hash__`` and, for a
frozen class, ``__setattr__`` and ``__delattr__``, and ``exec``s each text: Python parses and compiles it on every
start. A one-file lint creates about 85 classes, and these ~450 compiles were a third of the instructions it ran
(``docs/performance.md``). ``install`` routes the ``exec`` calls of the ``dataclasses`` module through a table
of code objects, each compiled by this interpreter from exactly the text it is found under. A text the table
lacks is compiled as before, and the run then writes the table again. A hit runs the code object that
``compile`` makes from that text, so the classes are the same.

The table is kept beside the package's byte code (``__pycache__``, or under ``sys.pycache_prefix``), as Python
keeps the modules' own compiled code: whoever can write there can already change what Python runs, so nothing is
trusted here that is not trusted already. Its name carries the interpreter's cache tag and optimisation level,
and its content starts with the byte-code magic number: a file of another interpreter, a damaged file or
anything else that does not read back as such a table is not used. Nothing is written when writing byte code is
off (``PYTHONDONTWRITEBYTECODE``), or where the directory is not writable (the table is then not used after the
run, and every start compiles as before). ``COMPATCHECK_CLASS_CACHE=0`` turns it off. Each entry stays
marshalled until a class needs it: the table holds the classes of every command run from this install, and a
lint unmarshals only its own.
"""

from __future__ import annotations

import builtins
import contextlib
import marshal
import os
import sys
from types import CodeType
from typing import Any

MAX_ENTRIES = 4000  # texts kept: the package's classes several times over (a checkout's edits add new texts)
_ENV = "COMPATCHECK_CLASS_CACHE"

_table: dict[str, bytes] = {}  # source text -> its code object, marshalled (unmarshalled when used)
_used: dict[str, CodeType] = {}
_path: str | None = None
_missed = False


def table_path() -> str | None:
    """Where the table of this interpreter lives, or None when it keeps no byte code (no cache tag)."""
    from importlib.util import cache_from_source

    try:
        beside = cache_from_source(os.path.join(os.path.dirname(os.path.dirname(__file__)), "__init__.py"))
    except NotImplementedError:  # sys.implementation.cache_tag is None
        return None
    tag = sys.implementation.cache_tag
    level = f".opt-{sys.flags.optimize}" if sys.flags.optimize else ""
    return os.path.join(os.path.dirname(beside), f"dataclass-methods.{tag}{level}.bin")


def _load(path: str) -> dict[str, bytes]:
    from importlib.util import MAGIC_NUMBER

    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return {}
    if not data.startswith(MAGIC_NUMBER):
        return {}
    try:
        table = marshal.loads(data[len(MAGIC_NUMBER):])
    except (ValueError, EOFError, TypeError):
        return {}
    if not isinstance(table, dict) or not all(type(k) is str and type(v) is bytes for k, v in table.items()):
        return {}
    return table


def _code(blob: bytes | None) -> CodeType | None:
    """A table entry's code object; None for one that does not unmarshal to code."""
    if blob is None:
        return None
    try:
        code = marshal.loads(blob)
    except (ValueError, EOFError, TypeError):
        return None
    return code if type(code) is CodeType else None


def _exec(source: Any, globals: Any = None, locals: Any = None, /, **kwargs: Any) -> None:
    """``exec`` for the ``dataclasses`` module: a source text runs as the code compiled from it."""
    global _missed
    if type(source) is str:
        code = _code(_table.get(source))
        if code is None:
            # What exec(source) compiles in the caller's frame: with its __future__ flags (dataclasses has none).
            flags = sys._getframe(1).f_code.co_flags & _future_flags()
            code = compile(source, "<string>", "exec", flags, dont_inherit=True)
            _missed = True
        _used[source] = code
        source = code
    builtins.exec(source, globals, locals, **kwargs)


def _future_flags() -> int:
    import __future__

    out = 0
    for name in __future__.all_feature_names:
        out |= getattr(__future__, name).compiler_flag
    return out


def install() -> None:
    """Route ``dataclasses``' compiles through the table (once per process; a no-op when turned off)."""
    global _path
    if _path is not None or os.environ.get(_ENV, "1") in ("0", "false", "no", "off"):
        return
    import dataclasses

    path = table_path()
    if path is None or getattr(dataclasses, "exec", builtins.exec) is not builtins.exec:
        return  # no byte-code directory, or someone else's exec is there already: leave it
    _path = path
    _table.update(_load(path))
    dataclasses.exec = _exec  # type: ignore[attr-defined]
    import atexit

    atexit.register(save)


def save() -> None:
    """Write the table when this run compiled a text it lacked (atomically: a temporary file renamed over)."""
    global _missed
    if _path is None or not _missed or sys.dont_write_bytecode:
        return
    from importlib.util import MAGIC_NUMBER

    _missed = False
    used = {source: marshal.dumps(code) for source, code in _used.items()}
    table = {**_table, **used} if len(_table) + len(used) <= MAX_ENTRIES else used
    tmp = f"{_path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(_path), exist_ok=True)
        with open(tmp, "wb") as fh:
            fh.write(MAGIC_NUMBER + marshal.dumps(table))
        os.replace(tmp, _path)
    except (OSError, ValueError):
        with contextlib.suppress(OSError):
            os.unlink(tmp)
