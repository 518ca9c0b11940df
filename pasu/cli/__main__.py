"""`python -m pasu.cli`: the same program as `pasu`."""

import sys

from pasu.cli import main

sys.exit(main())
