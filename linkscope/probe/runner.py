"""Running the external inspection commands (`nvidia-smi`, `ibstat`). One function so tests can replace it."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from collections.abc import Callable, Sequence

NOT_FOUND = 127
TIMED_OUT = 124


@dataclass(frozen=True)
class CommandResult:
    """What a command printed and how it ended. `returncode` 127 = not installed, 124 = timed out."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str = ""

    @property
    def ok(self) -> bool:
        """The command ran and exited 0."""
        return self.returncode == 0

    def why_failed(self) -> str:
        """One line saying why the command gave nothing usable."""
        name = " ".join(self.args)
        if self.returncode == NOT_FOUND:
            return f"`{self.args[0]}` not found"
        if self.returncode == TIMED_OUT:
            return f"`{name}` timed out"
        detail = (self.stderr or self.stdout).strip().splitlines()
        return f"`{name}` exited {self.returncode}" + (f": {detail[0]}" if detail else "")


CommandRunner = Callable[[Sequence[str]], CommandResult]


def run_command(args: Sequence[str], timeout_s: float = 30.0) -> CommandResult:
    """Run `args` without a shell and capture its text output; never raises for a missing or failing command."""
    argv = tuple(args)
    if shutil.which(argv[0]) is None:
        return CommandResult(argv, NOT_FOUND, "", f"{argv[0]}: command not found")
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False,
                              errors="replace")
    except subprocess.TimeoutExpired:
        return CommandResult(argv, TIMED_OUT, "", f"timed out after {timeout_s:g} s")
    except OSError as exc:
        return CommandResult(argv, NOT_FOUND, "", str(exc))
    return CommandResult(argv, done.returncode, done.stdout, done.stderr)
