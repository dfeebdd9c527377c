"""Exit codes shared by squall-mgr and the Python tools (STYLE.md: decide once, in main)."""

from enum import IntEnum


class Exit(IntEnum):
    OK = 0
    FAILED = 1  # failed at run time (e.g. the manager is not running)
    USAGE = 2  # bad arguments or config, as argparse does
    INTERRUPTED = 130  # Ctrl-C
