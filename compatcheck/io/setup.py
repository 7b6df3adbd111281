"""What a command needs before it runs, for the CLI and the webhook's commands alike: the config file and the
rules it configures, the exit codes, and ``CommandError``, the exception that stops a command with what to print
(one-line messages, and located diagnostics as ``file:line: error: ...``).

The command line imports this module before it knows the command, so the config and rule loaders are imported
when a command first asks for them: ``compatcheck --version`` never loads the engine."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from compatcheck.core.config import Config
    from compatcheck.core.model import Diagnostic
    from compatcheck.io.datastate import Knowledge
    from compatcheck.io.loader import Loaded

# 0: nothing at or above the failure threshold; 1: findings at or above it; 2: usage, config, rule or input errors.
EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class CommandError(Exception):
    """The command cannot go on. ``messages`` are printed as ``compatcheck: error: ...`` lines and ``problems`` as
    ``file:line: error: ...`` lines; the exit code is 2."""

    def __init__(self, *messages: str, problems: Iterable[Diagnostic] = ()) -> None:
        super().__init__("; ".join(messages) or "problems found")
        self.messages = messages
        self.problems = list(problems)


def rules(dirs: list[str], validate_builtin: bool = False, knowledge: Knowledge | None = None) -> Loaded:
    """The built-in rules and tables (or ``knowledge``'s: a data bundle, see ``io.datastate``) plus ``dirs``;
    CommandError listing every problem."""
    from compatcheck.io.loader import RuleLoadError, load_rules

    base = None
    if knowledge is not None and knowledge.kind != "builtin":
        base = knowledge.path
        validate_builtin = validate_builtin or not knowledge.trusted
    try:
        loaded = load_rules(dirs, validate_builtin=validate_builtin, base=base)
    except RuleLoadError as exc:
        raise CommandError(problems=exc.problems) from None
    loaded.knowledge = knowledge
    return loaded


def knowledge(choice: str | None, config_choice: str | None = None) -> Knowledge:
    """The knowledge ``--data`` (or ``$COMPATCHECK_DATA``, or the config's ``data.use``) chooses; CommandError."""
    from compatcheck.io.datastate import DataChoiceError, choose

    try:
        return choose(choice, config_choice)
    except DataChoiceError as exc:
        raise CommandError(str(exc)) from None


class Configured:
    """The config and the rules it configures (a plain class: ``dataclasses`` costs ``--version`` an import)."""

    __slots__ = ("config", "loaded")

    def __init__(self, config: Config, loaded: Loaded) -> None:
        self.config = config
        self.loaded = loaded  # with the config's severities, params and disabled rules applied

    def __repr__(self) -> str:
        return f"Configured(config={self.config!r}, loaded={self.loaded!r})"


def configure(config_path: str | None, rules_dirs: list[str], data: str | None = None) -> Configured:
    """The config file (None: defaults) and the rules it configures, from the knowledge ``data`` chooses (see
    ``knowledge``); CommandError listing every problem."""
    from compatcheck.core.config import ConfigError, apply_to_ruleset
    from compatcheck.io.config import load_config, locate

    try:
        config = load_config(config_path)
    except ConfigError as exc:
        raise CommandError(problems=exc.problems) from None
    loaded = rules([*config.rule_dirs, *rules_dirs], knowledge=knowledge(data, config.data.use))
    try:
        loaded.ruleset = apply_to_ruleset(config, loaded.ruleset)
    except ConfigError as exc:
        raise CommandError(problems=locate(exc.problems)) from None
    return Configured(config, loaded)


def configure_only(config_path: str | None) -> Config:
    """The config file (None: defaults), without loading rules; CommandError listing every problem."""
    from compatcheck.core.config import ConfigError
    from compatcheck.io.config import load_config

    try:
        return load_config(config_path)
    except ConfigError as exc:
        raise CommandError(problems=exc.problems) from None
