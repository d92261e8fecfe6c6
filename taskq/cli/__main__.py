"""``python -m taskq.cli``: the same as the ``taskq`` command."""

from __future__ import annotations

import sys

from taskq.cli.main import main

sys.exit(main())
