"""Errors that mean "the input is wrong", as opposed to faults in linkscope or the machine.

Every layer raises these; the command line turns them into one line on stderr and exit code 2.
They live in `hardware`, the lowest layer, so that every other layer can import them.
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user (a file, a flag, a name): reported as one line, exit code 2."""


class DataError(UserError):
    """A data file (GPU specs, presets, offerings, a System file) is malformed.

    The message names the file, the entry and the field, so the user can fix it without a traceback.
    """

    def __init__(self, file: str, problem: str, entry: str | None = None, field: str | None = None) -> None:
        self.file = file
        self.entry = entry
        self.field = field
        self.problem = problem
        where = [file]
        if entry:
            where.append(f"entry '{entry}'")
        if field:
            where.append(f"field '{field}'")
        super().__init__(f"{': '.join(where)}: {problem}")
