import sys

from kcoord.analytics.cli import main

sys.exit(main())
