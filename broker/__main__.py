"""`python -m broker ...` is the `kcoord` command."""
import sys

from broker.cli import main

sys.exit(main())
