"""Handlers of the limits' worker tests: each records, on the Redis server, what ran when.

``overlap`` counts the tasks running at once (``{ns}:running``) and keeps the most seen
(``{ns}:most``); ``stamp`` pushes each task's lease end (``{ns}:leases``, server ms): its
claim's server clock plus the 30 s lease, the instant a rate limit counts.
"""

from __future__ import annotations

import json
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


_ENTER_KEY = """
local n = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
if n > tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0') then
  redis.call('HSET', KEYS[2], ARGV[1], n)
end
redis.call('RPUSH', KEYS[3], ARGV[1])
return n
"""


def _tenant(job: Job) -> str:
    return str(json.loads(job.claim.payload)["kwargs"]["tenant_id"])


def overlap_by_key(job: Job) -> str:
    """Count the tasks of each tenant running at once (``{ns}:krunning``), keep the most
    seen per tenant (``{ns}:kmost``) and the order of starts (``{ns}:order``)."""
    client = connection()
    tenant = _tenant(job)
    client.eval(_ENTER_KEY, 3, _key("krunning"), _key("kmost"), _key("order"), tenant)
    try:
        time.sleep(0.02)
    finally:
        client.hincrby(_key("krunning"), tenant, -1)
    return ""


def order(job: Job) -> str:
    """Push each task's tenant, in the order the tasks start (``{ns}:order``)."""
    connection().rpush(_key("order"), _tenant(job))
    return ""


def hang_first(job: Job) -> str:
    """A first attempt of a task with ``hang`` marks ``{ns}:hung`` and hangs (its worker is
    killed meanwhile); any other run pushes its id to ``{ns}:done``."""
    if json.loads(job.claim.payload)["kwargs"].get("hang") and job.claim.attempt == 1:
        connection().set(_key("hung"), job.claim.request_id)
        time.sleep(120)
    connection().rpush(_key("done"), job.claim.request_id)
    return ""
