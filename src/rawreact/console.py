"""The `rawreact` console script: loads the command line, so that Ctrl-C while it loads ends quietly."""

import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `rawreact` command."""
    try:
        from rawreact.cli.app import main as command

        return command(argv)  # it handles Ctrl-C itself once a run is under way, saying what was kept
    except KeyboardInterrupt:
        print("\nrawreact: interrupted", file=sys.stderr)
        return 130
