"""compatcheck's directory in the user's cache directory, where the image-config cache (``images/``,
``io.imagecache``) and the parsed built-in rule files (``rules/``, ``io.rulecache``) live. Its own module, so that
a lint that reads only the rule cache does not import the image cache (tempfile, shutil, random)."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def user_cache_dir() -> Path:
    """compatcheck's directory in the platform's user cache directory (``images`` and ``rules`` are under it)."""
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches" / "compatcheck"
    elif sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local") / "compatcheck" / "Cache"
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = (Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache") / "compatcheck"
    return base
