"""linkscope.bench.orphan: the parent-watch thread alone (without PR_SET_PDEATHSIG) ends an orphaned rank."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from linkscope.results.store import pid_alive

# The middle process starts a grandchild that watches it (watch thread only), prints its pid and exits.
_MIDDLE = """
import subprocess, sys, os
child = subprocess.Popen([sys.executable, "-c", '''
import os, sys, time
from linkscope.bench import orphan
orphan._watch_parent(int(sys.argv[1]), 0.1)
''', str(os.getpid())])
print(child.pid, flush=True)
"""


def test_the_watch_thread_exits_a_rank_whose_parent_is_gone() -> None:
    middle = subprocess.run([sys.executable, "-c", _MIDDLE], capture_output=True, text=True, timeout=60, check=True)
    pid = int(middle.stdout.split()[0])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and pid_alive(pid):
        time.sleep(0.1)
    assert not pid_alive(pid)


def test_a_live_parent_is_not_gone() -> None:
    from linkscope.bench.orphan import parent_gone

    assert not parent_gone(os.getppid())
