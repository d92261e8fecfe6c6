"""A module whose import ends the process that imports it, saying why on stderr first."""

import os
import sys

print("exits_on_import: leaving before the report", file=sys.stderr, flush=True)
os._exit(3)
