"""The demo's tasks: what `scripts/demo.sh` keeps flowing so the admin shows work.

The demo's scheduler admits `send_receipt` every 3 seconds and `build_report` each
minute (`LEDGER_DEMO=1` in `testproject/settings.py`); its worker runs them. One receipt
in six raises, to show retries with backoff and, after the last attempt, a failure.
"""

from __future__ import annotations

import random
import time
from typing import Any

from django_ledger.tasks import task


@task(queue_name="tasks")
def send_receipt() -> dict[str, Any]:
    """Pretend to send a receipt: a fraction of a second, and now and then an error."""
    order = random.randint(1000, 9999)
    time.sleep(random.uniform(0.2, 1.5))
    if random.random() < 1 / 6:
        raise ConnectionError(f"the mail server hung up while sending order {order}")
    return {"order": order, "sent": True}


@task(queue_name="tasks")
def build_report() -> dict[str, Any]:
    """Pretend to build a report."""
    time.sleep(0.5)
    return {"rows": random.randint(10, 500)}
