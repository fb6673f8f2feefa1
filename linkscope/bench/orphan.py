"""Ranks die with their launcher.

A SIGKILLed launcher cannot stop its ranks, and a rank blocked in a collective would wait for ever.
On Linux the kernel sends the rank SIGKILL when its parent dies (PR_SET_PDEATHSIG); elsewhere, and
as a second line, a daemon thread notices that the parent pid is gone and exits the rank.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1
WATCH_INTERVAL_S = 1.0
ORPHAN_EXIT_CODE = 3


def _set_pdeathsig() -> bool:
    """Ask Linux to SIGKILL this process when its parent exits; False where that is unavailable."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def parent_gone(parent_pid: int) -> bool:
    """Whether the process that started this one has exited (we were re-parented)."""
    return os.getppid() != parent_pid


def _watch_parent(parent_pid: int, interval_s: float) -> None:
    while True:
        if parent_gone(parent_pid):
            os._exit(ORPHAN_EXIT_CODE)  # no clean-up: nobody is left to report to
        time.sleep(interval_s)


def die_with_parent(parent_pid: int, interval_s: float = WATCH_INTERVAL_S) -> None:
    """Make this process exit once `parent_pid` (its launcher) is gone."""
    _set_pdeathsig()
    # The parent may have died before prctl took effect; then the signal never comes.
    if parent_gone(parent_pid):
        os._exit(ORPHAN_EXIT_CODE)
    threading.Thread(target=_watch_parent, args=(parent_pid, interval_s), daemon=True,
                     name="linkscope-parent-watch").start()
