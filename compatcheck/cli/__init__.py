"""The command line: one module per subcommand group, each of which only parses, calls, formats and exits.

The webhook's own subcommands (``webhook serve``, ``cert generate``, ``review``) are registered by
``compatcheck.cli.webhook``, whose handlers are named by string and imported only when run, so a lint-only
install (no webhook extra) never imports aiohttp, kubernetes or cryptography.
"""

from compatcheck.cli.entry import main

__all__ = ["main"]
