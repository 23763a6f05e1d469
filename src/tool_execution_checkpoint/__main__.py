"""``python -m tool_execution_checkpoint``: the command line (see the cli package)."""

import sys

from .cli import main

sys.exit(main())
