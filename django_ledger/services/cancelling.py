"""Cancel records, queued or running: the faces' one path (``tasks/record_cancel.py``).

The API's cancel route and ``manage.py ledger_cancel`` reach it here, the layer they may
import; ``docs/tasks.md`` ("Cancelling") says what a cancel does.
"""

from __future__ import annotations

from ..tasks.record_cancel import CancelOutcome, cancel_record, effects_database

__all__ = ["CancelOutcome", "cancel_record", "effects_database"]
