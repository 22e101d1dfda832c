"""The task of ``benchmarks/transactions_chaos.py``: a fenced increment of a counter row.

Every entry to the body is logged first in ``chaos_run`` (autocommit: a run, even one
whose effects are then refused or skipped); the increment of ``chaos_counter`` is made
inside ``effects(context)``, so it lands once per task however often the task runs.
"""

from __future__ import annotations

from typing import Any

from django.db import connections

from django_ledger.tasks import LedgerTaskContext, effects, task


@task(takes_context=True)
def bump(context: LedgerTaskContext, order_id: str) -> Any:
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "INSERT INTO chaos_run (order_id, fence) VALUES (%s, %s)", [order_id, context.fence]
        )
    with effects(context) as fx:
        if fx.done:
            return fx.result
        with connections[fx.database].cursor() as cursor:
            cursor.execute(
                "INSERT INTO chaos_counter (order_id, n) VALUES (%s, 1) ON CONFLICT (order_id) "
                "DO UPDATE SET n = chaos_counter.n + 1",
                [order_id],
            )
        return fx.save(1)
