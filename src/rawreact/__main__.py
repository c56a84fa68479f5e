"""`python -m rawreact`, the same as the `rawreact` command."""

import sys

from rawreact.console import main

sys.exit(main())
