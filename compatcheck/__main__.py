"""``python -m compatcheck`` entry point."""

from compatcheck.cli import main

raise SystemExit(main())
