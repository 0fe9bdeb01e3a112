"""``python -m lmspec``: the same as the ``lmspec`` command."""

import sys

from lmspec.cli import main

sys.exit(main())
