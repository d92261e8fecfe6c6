"""An argument parser whose errors are one line, for every taskq command.

argparse prints a command's whole usage above its complaint; for
``taskq-worker``, with its many flags, that is a screen. Each command says
instead ``PROGRAM: error: MESSAGE (see 'PROGRAM --help')``, as it says its
other errors, and exits 2.
"""

from __future__ import annotations

import argparse
from typing import NoReturn

EXIT_USAGE = 2


class OneLineParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser``, its errors one line naming the program."""

    def error(self, message: str) -> NoReturn:
        program = self.prog.split()[0]
        self.exit(EXIT_USAGE, f"{program}: error: {message} (see '{self.prog} --help')\n")
