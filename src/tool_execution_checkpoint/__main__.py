"""``python -m tool_execution_checkpoint``: the command line (see cli.py)."""

import sys

from .cli import main

sys.exit(main())
