"""Errors that mean "the input is wrong", as opposed to faults in linkscope or the machine.

Every layer raises these; the command line turns them into one line on stderr and exit code 2.
They live in `hardware`, the lowest layer, so that every other layer can import them.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path


class UserError(Exception):
    """Bad input from the user (a file, a flag, a name): reported as one line, exit code 2.

    Layers below the command line say which input was wrong with `field`, in their own vocabulary
    (`global_batch`, `tp`, `system`); the command line names its flag for it (`--global-batch`), so no layer
    below it spells a flag.
    """

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message

    def for_flags(self, flags: dict[str, str] | None = None) -> str:
        """The message with `field` named as the command line spells it (`--global-batch` by default)."""
        if not self.field:
            return self.message
        flag = (flags or {}).get(self.field, "--" + self.field.replace("_", "-"))
        return f"{flag}: {self.message}"


class DataError(UserError):
    """A data file (GPU specs, presets, offerings, a System file) is malformed.

    The message names the file, the entry and the field, so the user can fix it without a traceback.
    """

    def __init__(self, file: str, problem: str, entry: str | None = None, field: str | None = None) -> None:
        self.file = file
        self.entry = entry
        self.data_field = field
        self.problem = problem
        where = [file]
        if entry:
            where.append(f"entry '{entry}'")
        if field:
            where.append(f"field '{field}'")
        super().__init__(f"{': '.join(where)}: {problem}")


def check_output_path(path: str | Path | None, option: str) -> None:
    """A file the user asked linkscope to write must be creatable: its directory exists and is writable, and it
    is not a directory. Checked before any work, so a mistyped path never costs a whole run."""
    if not path:
        return
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    _require_regular_or_absent(target, option)
    if not parent.is_dir():
        raise UserError(f"{option} {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise UserError(f"{option} {path}: not writable")
    # Permission bits do not tell everything (root passes os.access; /proc refuses new files): try it.
    existed = target.exists()
    try:
        with open(target, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise UserError(f"{option} {path}: cannot be written ({exc.strerror or exc})") from None
    if not existed:
        target.unlink(missing_ok=True)


def _require_regular_or_absent(target: Path, option: str) -> None:
    """Outputs are written by renaming a new file over the target: over a device (/dev/null), a FIFO or a
    directory that would replace it (as root) or fail late, so anything but a regular file is refused up front."""
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UserError(f"{option} {target}: cannot be written ({exc.strerror or exc})") from None
    if stat.S_ISDIR(mode):
        raise UserError(f"{option} {target}: is a directory, not a file")
    if not stat.S_ISREG(mode):
        raise UserError(f"{option} {target}: not a regular file (a device, FIFO or socket); give a file path")


def output_mode() -> int:
    """The permission bits a plain `open(path, "w")` would give a new file: 0666 less the umask (0644 under the
    usual 022), so a file written atomically is as readable as one written directly."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_output(path: str | Path, data: str | bytes, option: str, mode: int | None = None) -> None:
    """Write a file the user named: a temporary file beside it renamed into place (a reader never sees half a file,
    a failed write leaves the old one), only onto a regular file or a new path. `mode` defaults to `output_mode()`.
    Every OS failure (ENOSPC, EACCES, EROFS, ENAMETOOLONG) is a UserError naming the option and the path."""
    import tempfile

    target = Path(path)
    _require_regular_or_absent(target, option)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".linkscope-", suffix=".tmp", dir=target.parent if str(target.parent)
                                   else Path("."))
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            os.fchmod(fh.fileno(), output_mode() if mode is None else mode)
        _require_regular_or_absent(target, option)  # it may have changed while the payload was written
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        raise UserError(f"{option} {path}: cannot be written ({exc.strerror or exc})") from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def check_input_file(path: str | Path, what: str, max_bytes: int) -> Path:
    """A file linkscope is asked to read is a regular file of at most `max_bytes`: a FIFO would block the open
    forever and a device (/dev/zero) never ends, so both are refused before anything opens them."""
    target = Path(path)
    try:
        info = target.stat()
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(info.st_mode):
        raise UserError(f"{path}: is a directory, not {what}")
    if not stat.S_ISREG(info.st_mode):
        raise UserError(f"{path}: not a regular file (a FIFO, device or socket); give {what} saved to a file")
    if info.st_size > max_bytes:
        raise UserError(f"{path}: {info.st_size:,} bytes is more than the {max_bytes // 2**20} MiB limit for {what}")
    return target


def read_input_bytes(path: str | Path, what: str, max_bytes: int) -> bytes:
    """`check_input_file`, then at most `max_bytes` of it (a file still growing cannot run past the limit). Opened
    without blocking and checked again on the open file, so a FIFO swapped in after the check cannot hang it."""
    target = check_input_file(path, what, max_bytes)
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UserError(f"{path}: not a regular file (a FIFO, device or socket); give {what} saved to a file")
        with os.fdopen(fd, "rb") as fh:
            fd = -1
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror or exc})") from None
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > max_bytes:
        raise UserError(f"{path}: more than the {max_bytes // 2**20} MiB limit for {what}")
    return data


class FaultError(Exception):
    """A fault outside the user's input (a database server that went away, a node that died): one line, exit 3.

    Whatever was measured and committed before it stays stored."""
