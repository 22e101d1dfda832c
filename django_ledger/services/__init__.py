"""What the management commands do, as functions that return counts.

The commands only parse options, call these, and print; these know nothing of
``argparse`` or terminals.
"""

from .formats import Row, read_csv, read_jsonl
from .repair import QueueRepair, configured_queues, repair_queue, repair_queues
from .transfer import (
    ExportResult,
    ImportAborted,
    ImportResult,
    LineProblem,
    export_queue,
    import_lines,
)

__all__ = [
    "ExportResult",
    "ImportAborted",
    "ImportResult",
    "LineProblem",
    "QueueRepair",
    "Row",
    "configured_queues",
    "export_queue",
    "import_lines",
    "read_csv",
    "read_jsonl",
    "repair_queue",
    "repair_queues",
]
