"""``python -m tools.grade``: see tools/grade/cli.py."""

from lmspec.tools.grade.cli import main

raise SystemExit(main())
