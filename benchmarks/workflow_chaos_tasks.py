"""The tasks of ``benchmarks/workflow_chaos.py``: a chord's step and its callback.

Each entry to a body is logged first, outside Redis (a Redis that is killed cannot take
the evidence with it), in ``$CHAOS_DIR/runs-<pid>.log``: one ``write`` per line on a file
opened with ``O_APPEND``, so whole lines survive a SIGKILL:

* ``S chord index fence``: a step's body began;
* ``C chord count in_order fence``: the callback's body began, with what it was given.

The callback's effect, a row of ``chaos_callback`` (chord, count, in order), is written
inside ``effects(context)``, so it lands once per chord however often the callback runs.
``$CHAOS_WORK_SECONDS`` (default 0.02) makes each step sleep a random time up to that
long, so that runs are in flight when a fault lands.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

from django.db import connections

from django_ledger.tasks import LedgerTaskContext, effects, task

_log: list[int] = []


def _write(line: str) -> None:
    if not _log:
        path = os.path.join(os.environ["CHAOS_DIR"], f"runs-{os.getpid()}.log")
        _log.append(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))
    os.write(_log[0], (line + "\n").encode())


@task(takes_context=True)
def part(context: LedgerTaskContext, chord: str, index: int) -> int:
    _write(f"S {chord} {index} {context.fence}")
    time.sleep(random.uniform(0, float(os.environ.get("CHAOS_WORK_SECONDS", "0.02"))))
    return index


@task(takes_context=True)
def gather(context: LedgerTaskContext, results: list[Any], chord: str) -> Any:
    in_order = int(results == list(range(len(results))))
    _write(f"C {chord} {len(results)} {in_order} {context.fence}")
    with effects(context) as fx:
        if fx.done:
            return fx.result
        with connections[fx.database].cursor() as cursor:
            cursor.execute(
                "INSERT INTO chaos_callback (chord, n, in_order) VALUES (%s, %s, %s)",
                [chord, len(results), in_order],
            )
        return fx.save([len(results), in_order])
