"""`python -m rawreact`, the same as the `rawreact` command."""

import sys

from rawreact.cli import main

sys.exit(main())
