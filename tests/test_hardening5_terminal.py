"""Hardening, fifth round (issue 67 item 23): the test run on a busy machine. A Ctrl-C test's interrupt once landed
inside the hook that sends a dropped interrupt again, while that hook started a thread, and was lost. Each test
failed on the main before the round."""

import subprocess
import sys

INTERRUPT_IN_THE_HOOK = """
import sys, threading, time, types

from rawreact.cli import terminal

terminal.take_interrupts()
landed = []


def once(original):
    def patched(self, *args, **kwargs):
        if not landed:  # a second interrupt lands here, in the hook's first call into threading
            landed.append(True)
            raise KeyboardInterrupt
        return original(self, *args, **kwargs)

    return patched


threading.Event.set = once(threading.Event.set)
threading.Thread.start = once(threading.Thread.start)
dropped = types.SimpleNamespace(exc_type=KeyboardInterrupt, exc_value=KeyboardInterrupt(), exc_traceback=None,
                                err_msg=None, object=None)
try:
    terminal._unraisable(dropped)
except KeyboardInterrupt:
    print("it escaped the hook")
    sys.exit(3)
try:
    time.sleep(5)
except KeyboardInterrupt:
    print("sent again", len(landed))
    sys.exit(0)
print("lost")
sys.exit(4)
"""


def test_an_interrupt_landing_inside_the_hook_that_sends_one_again_is_not_lost():
    """Python drops a KeyboardInterrupt raised where it cannot pass it on (a destructor, a C callback) and hands it
    to `sys.unraisablehook`, which rawreact's sends again; an interrupt landing in that hook itself (here, in its
    first call into threading) neither escapes it nor stops the first from being sent again."""
    done = subprocess.run([sys.executable, "-c", INTERRUPT_IN_THE_HOOK], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "sent again 1", (done.returncode, done.stdout, done.stderr[-2000:])
    assert done.returncode == 0 and "Traceback" not in done.stderr
