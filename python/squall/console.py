"""The rich Console the command-line tools print tables with."""

from __future__ import annotations

import os
import sys

from rich.console import Console

# Piped (a log, `make demo`'s output, `| less`), rich takes 80 columns and
# cuts a wide table's cells to an ellipsis each ("25…" for a pid): wide enough
# here for every column of squallctl's tables, which a terminal wraps.
PIPED_WIDTH = 240


def console() -> Console:
    """A terminal's own width (or COLUMNS, if set); piped, PIPED_WIDTH."""
    if "COLUMNS" in os.environ or sys.stdout.isatty():
        return Console()
    return Console(width=PIPED_WIDTH)
