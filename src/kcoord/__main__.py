"""`python -m kcoord ...` is the `kcoord` command (tools/cli.py)."""
import sys

from kcoord.tools.cli import main

sys.exit(main())
