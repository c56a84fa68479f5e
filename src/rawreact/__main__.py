"""`python -m rawreact`, the same as the `rawreact` command."""

from rawreact.console import run

run()
