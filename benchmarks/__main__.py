"""Entry point: ``python -m benchmarks``."""

import sys

from .harness import main

sys.exit(main())
