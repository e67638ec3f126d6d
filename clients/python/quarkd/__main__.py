"""python -m quarkd ...: see quarkd.cli."""
import sys

from .cli import main

sys.exit(main())
