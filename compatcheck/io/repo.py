"""Where the repository a run works in starts: the directory that holds ``.git`` (a directory, or the file a
worktree or submodule has), walking up from the working directory. SARIF names files relative to it."""

from __future__ import annotations

import os


def repository_root(start: str | None = None) -> str | None:
    """The closest directory at or above ``start`` (default: the working directory) holding ``.git``, or None."""
    here = os.path.abspath(start or os.getcwd())
    while True:
        if os.path.exists(os.path.join(here, ".git")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent
