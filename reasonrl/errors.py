"""One error style for every ``reasonrl`` command.

Bad input the user can fix raises :class:`UserError`; ``reasonrl.cli.main`` prints it as
``reasonrl <command>: <file or key>: <what is wrong>`` on stderr and exits with
:data:`USER_ERROR_EXIT` — no traceback unless ``--debug`` (or ``REASONRL_DEBUG=1``).
"""

from __future__ import annotations

import os

#: exit code of a refused input (argparse's own code for a bad command line)
USER_ERROR_EXIT = 2
DEBUG_ENV = "REASONRL_DEBUG"


class UserError(Exception):
    """Bad input, named: ``subject`` is the file (``path:line`` where known) or the config key."""

    def __init__(self, subject: str | os.PathLike, message: str):
        self.subject, self.message = str(subject), message
        super().__init__(f"{self.subject}: {message}" if self.subject else message)

    def __reduce__(self):  # raised in Ray or multiprocessing workers too: pickles with its fields
        return type(self), (self.subject, self.message)


def debug_enabled() -> bool:
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


def user_error_line(command: str, error: UserError) -> str:
    """``reasonrl <command>: <subject>: <message>``."""
    return f"reasonrl {command}: {error}" if command else f"reasonrl: {error}"
