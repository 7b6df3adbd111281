""""Did you mean ...?" for a name that is not one of the known ones (an option, a subcommand, a rule id, a config
key), as git, cargo and ruff say it. Pure."""

from __future__ import annotations

from collections.abc import Iterable


def closest(word: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``word`` (difflib's ratio of at least 0.6), or None."""
    import difflib  # only when a name is unknown: every command's parser imports this module

    found = difflib.get_close_matches(word, sorted(set(known)), n=1, cutoff=0.6)
    return found[0] if found else None


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` to append to a message about ``word``, or "" when nothing is close."""
    match = closest(word, known)
    return f" (did you mean {match!r}?)" if match is not None else ""
