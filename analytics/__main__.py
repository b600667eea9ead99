import sys

from analytics.cli import main

sys.exit(main())
