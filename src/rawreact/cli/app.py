"""The `rawreact` command: wires the library together and prints; errors are one line each."""

import contextlib
import os
import sys
from pathlib import Path

from rawreact.cli.compare import compare_command
from rawreact.cli.files import (
    compare_runs_command,
    data_command,
    export_command,
    games_command,
    index_command,
    merge_command,
    plugins_command,
    report,
    show_command,
)
from rawreact.cli.parser import parser as _parser
from rawreact.cli.run import run
from rawreact.cli.terminal import stopped_code
from rawreact.core.errors import RawreactError
from rawreact.core.text import printable
from rawreact.runs import runfile


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `rawreact` console script."""
    parser = _parser()
    if "_ARGCOMPLETE" in os.environ:  # the shell asks for completions (pip install 'rawreact[completion]')
        with contextlib.suppress(ImportError):
            import argcomplete

            argcomplete.autocomplete(parser)  # answers the shell and ends the process
    args = parser.parse_args(argv)
    runfile.COMMAND = ["rawreact", *(sys.argv[1:] if argv is None else argv)]  # what a new manifest records
    if args.command is None:  # a bare `rawreact`: say what it can do, as git and pip do
        parser.print_help()
        return 0
    commands = {
        "run": run,
        "compare": compare_command,
        "compare-runs": compare_runs_command,
        "report": report,
        "show": show_command,
        "export": export_command,
        "index": index_command,
        "games": games_command,
        "data": data_command,
        "plugins": plugins_command,
        "merge": merge_command,
    }
    try:
        return commands[args.command](args)
    except RawreactError as error:
        print(f"rawreact: error: {printable(str(error))}", file=sys.stderr)  # it may quote data or a server
        return 2
    except KeyboardInterrupt:
        out = getattr(args, "out", None)
        kept = f"; what finished is in {out}, --resume finishes" if out and Path(out).exists() else ""
        print(f"\nrawreact: interrupted{kept}", file=sys.stderr)
        return stopped_code()
    except BrokenPipeError:
        return 1
    except Exception as error:  # a bug of ours: say so in one line, show the traceback on request
        if os.environ.get("RAWREACT_DEBUG"):
            raise
        print(
            f"rawreact: internal error: {type(error).__name__}: {printable(str(error))}; rerun with RAWREACT_DEBUG=1 "
            "for the traceback, and please report it",
            file=sys.stderr,
        )
        return 1
    finally:
        runfile.COMMAND = None  # a run made from Python afterwards in this process is not this command's


if __name__ == "__main__":
    sys.exit(main())
