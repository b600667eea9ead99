"""`python -m kcoord.tools ...` is the `kcoord` command."""
import sys

from kcoord.tools.cli import main

sys.exit(main())
