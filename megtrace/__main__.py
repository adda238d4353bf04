"""`python -m megtrace ...` is the `megtrace` command."""
import sys

from .cli import main

sys.exit(main())
