"""Processes ended for good: killed, and looked for again, since a process may start another while it dies."""

import contextlib
import os
import signal
import time
from collections.abc import Callable, Collection


def kill_until_gone(find: Callable[[], Collection[int]], rounds: int = 100, pause: float = 0.01) -> None:
    """SIGKILL every process `find()` names, then ask again, until it names none or `rounds` are spent."""
    for _ in range(rounds):
        doomed = find()
        if not doomed:
            return
        for pid in doomed:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(pause)
