"""``python -m compatcheck`` entry point."""

from compatcheck.cli.entry import main

raise SystemExit(main())
