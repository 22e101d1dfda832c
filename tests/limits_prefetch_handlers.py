"""Handler of tests/test_limits_prefetch_worker.py: each task records, on the Redis
server, when it started (the server's clock) and whether its claim was held."""

from __future__ import annotations

import time

from django_ledger.conf import connection, ledger_settings
from django_ledger.core.worker import Job


def started(job: Job) -> str:
    client = connection()
    seconds, micros = client.time()
    client.rpush(
        f"{ledger_settings.namespace}:starts",
        f"{seconds * 1000 + micros // 1000}:{int(job.claim.held)}",
    )
    time.sleep(0.01)  # the task's work: threads stay busy, so claims are held ahead
    return ""
