"""A module no schedule stored at run time may import: importing it leaves a mark."""

import os

os.environ["LEDGER_SCHEDULE_TRAP_IMPORTED"] = "1"


def run() -> None:
    """What a hostile schedule would name."""
