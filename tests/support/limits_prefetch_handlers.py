"""Handler of tests/worker/test_limits_prefetch_worker.py: each task records, on the Redis
server's clock, when the rate counts it as started, and whether its claim was held.

A claim that starts at once is counted at its claim (its lease end less the 30 s lease):
the gap from there to the task's first line is the worker's (docs/limits.md). A held
claim is counted when its work starts, here: the server's clock as the task begins."""

from __future__ import annotations

import time

from django_ledger.conf import connection, ledger_settings
from django_ledger.core.worker import Job


def started(job: Job) -> str:
    client = connection()
    if job.claim.held:
        seconds, micros = client.time()
        at = seconds * 1000 + micros // 1000
    else:
        at = job.claim.lease_until - 30_000
    client.rpush(f"{ledger_settings.namespace}:starts", f"{at}:{int(job.claim.held)}")
    time.sleep(0.01)  # the task's work: threads stay busy, so claims are held ahead
    return ""
