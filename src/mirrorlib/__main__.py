"""``python -m mirrorlib`` runs the command line."""

import sys

from mirrorlib.cli import main

sys.exit(main())
