"""The `rawreact` console script: loads the command line, so that Ctrl-C while it loads ends quietly, and
ends a process that a signal stopped without tearing llama.cpp down under a thread still using it."""

import contextlib
import os
import signal
import sys

# Exit codes of a command a signal stopped (128 + SIGINT, 128 + SIGTERM).
STOPPED = (130, 143)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `rawreact` command."""
    try:
        # The handler first (its module needs only the standard library), then the command's imports: a Ctrl-C
        # that lands in an import lock's callback while they load is sent again, not printed and dropped.
        from rawreact.cli.terminal import take_interrupts

        take_interrupts()
        from rawreact.cli.app import main as command

        return command(argv)  # it handles Ctrl-C itself once a run is under way, saying what was kept
    except KeyboardInterrupt:
        print("\nrawreact: interrupted", file=sys.stderr)
        from rawreact.cli.terminal import stopped_code

        return stopped_code()


def run(argv: list[str] | None = None) -> None:
    """Run the command and end the process with its exit code.

    After Ctrl-C twice the embedded model's decoder thread may still be inside llama.cpp, and a normal
    interpreter exit frees the model and its contexts under it: a crash (exit 139) with no message, seen
    about once in six double interrupts. Everything a run keeps is written and flushed as it goes (each
    record, the manifest, the trials under way), so a stopped command ends at once instead, past the
    interpreter's teardown, once its own output is flushed.
    """
    code, called = STOPPED[0], False
    while True:  # a Ctrl-C or SIGTERM that lands after the command returned, before the handler is let go
        try:
            if not called:
                called = True
                code = main(argv)
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # from here a Ctrl-C would only print a traceback
            signal.signal(signal.SIGTERM, signal.SIG_DFL)  # and SIGTERM ends the process as it does any other
            break
        except KeyboardInterrupt:  # seen in CI once: exit -2, a second Ctrl-C a moment after the run's last line
            from rawreact.cli.terminal import stopped_code

            code = stopped_code()
    if code in STOPPED:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more can be said
                stream.flush()
        os._exit(code)
    sys.exit(code)
