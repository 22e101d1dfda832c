"""Handlers of the limits' worker tests: each records, on the Redis server, what ran when.

``overlap`` counts the tasks running at once (``{ns}:running``) and keeps the most seen
(``{ns}:most``); ``stamp`` pushes each task's lease end (``{ns}:leases``, server ms): its
claim's server clock plus the 30 s lease, the instant a rate limit counts.
"""

from __future__ import annotations

import time

from django_ledger.conf import connection, ledger_settings
from django_ledger.core.worker import Job

_ENTER = """
local n = redis.call('INCR', KEYS[1])
if n > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], n) end
return n
"""


def _key(name: str) -> str:
    return f"{ledger_settings.namespace}:{name}"


def overlap(job: Job) -> str:
    client = connection()
    client.eval(_ENTER, 2, _key("running"), _key("most"))
    try:
        time.sleep(0.03)  # the task's work: long enough for overlaps to show
    finally:
        client.decr(_key("running"))
    return ""


def stamp(job: Job) -> str:
    connection().rpush(_key("leases"), job.claim.lease_until)
    return ""
