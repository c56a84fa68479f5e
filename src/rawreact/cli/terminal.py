"""What a command does at a terminal: stop gracefully on Ctrl-C or SIGTERM, and show a progress bar."""

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

_last = signal.SIGINT  # the signal `interrupt` raised for last


def interrupt(number: int, frame) -> None:
    """Raise KeyboardInterrupt for signal `number` (see `take_interrupts`)."""
    global _last
    _last = number
    raise KeyboardInterrupt


def _unraisable(found) -> None:
    """Where Python cannot pass an exception on (a destructor, or a function that C calls back, such as
    llama.cpp's log), it prints it as a traceback and drops it: a KeyboardInterrupt that lands there is sent
    again in a moment instead, and anything else is printed as Python prints it.

    All this does for an interrupt is set an event that a thread started before waits on: another interrupt
    that lands in here (a second Ctrl-C, SIGTERM) is caught and the event set again, which sends one."""
    if not isinstance(found.exc_value, KeyboardInterrupt):
        sys.__unraisablehook__(found)
        return
    for _ in range(8):
        try:
            _again.set()
            return
        except KeyboardInterrupt:
            continue


_again = threading.Event()


def _send_again() -> None:
    while True:
        _again.wait()
        _again.clear()
        time.sleep(0.02)  # the code that dropped it has returned by then
        os.kill(os.getpid(), _last)


def stopped_code() -> int:
    """The exit code of a command that a signal stopped: 128 and the signal (130 for Ctrl-C, 143 for SIGTERM)."""
    return 128 + _last


def take_interrupts() -> None:
    """Ctrl-C and SIGTERM raise KeyboardInterrupt, as Python's own handler does Ctrl-C, and one that lands where
    Python would drop it is sent again once that code returned (the model may be loading or being freed)."""
    global _sender
    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)  # SIGTERM as Ctrl-C: "interrupted", and 143 (see `stopped_code`)
    sys.unraisablehook = _unraisable
    if _sender is None:
        _sender = threading.Thread(target=_send_again, daemon=True, name="rawreact-interrupts")
        _sender.start()


_sender: threading.Thread | None = None


class Stopper:
    """Ctrl-C or SIGTERM once: finish the questions under way, then stop. Twice: stop at once."""

    def __init__(self, workers: int = 1) -> None:
        self.signal: int | None = None
        self.under_way = "the current question" if workers == 1 else "the questions under way"

    def __enter__(self) -> "Stopper":
        self._old = {s: signal.signal(s, self._handle) for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *exc) -> None:
        for s, handler in self._old.items():
            signal.signal(s, handler)

    def _handle(self, number: int, frame) -> None:
        if self.signal is not None:
            interrupt(number, frame)
        self.signal = number
        env = sys.modules.get("rawreact.environments.env")  # not imported in a signal handler: it may hold a lock
        verbs = env.waiting_on() if env is not None else []
        waits = f"; waiting on your verb {', '.join(verbs)}, bounded by --verb-timeout" if verbs else ""
        print(f"\nrawreact: stopping after {self.under_way}{waits} (again to stop now)", file=sys.stderr, flush=True)


@contextmanager
def terminated_as_interrupt() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt inside the block, so the cleanup written for Ctrl-C runs for it too."""

    old = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def progress(total: int, done: int):
    """A progress bar on stderr when it is a terminal (tqdm turns itself off otherwise).

    Its clock ticks every second while questions are under way, even before the first one finishes,
    and its rate and time left count only the questions answered in this process: `done` (already
    in the run file) is where it starts, not progress.
    """
    from tqdm import tqdm

    class Bar(tqdm):
        def close(self) -> None:
            self.ticking.set()
            super().close()

        def resumed(self, done: int) -> None:
            """Count `done` questions found in a run file as there, not as answered now."""
            if self.disable:  # not a terminal: no bar to count on
                return
            self.n += done
            self.last_print_n += done
            self.initial += done
            self.refresh()

    bar = Bar(total=total, initial=done, unit="q", dynamic_ncols=True, disable=None, file=sys.stderr)
    bar.ticking = threading.Event()
    if not bar.disable:
        threading.Thread(target=_tick, args=(bar,), daemon=True).start()
    return bar


def _tick(bar) -> None:
    while not bar.ticking.wait(1.0):
        bar.refresh()
