"""``python -m rankmap`` runs the command line."""

import sys

from rankmap.cli import main

sys.exit(main())
