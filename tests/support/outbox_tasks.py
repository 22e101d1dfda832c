"""Tasks with fenced effects, for the outbox tests: each writes one auth ``Group`` row."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group

from django_ledger.tasks import LedgerTaskContext, effects, task

#: How many times a body ran (in this process): the effects skip it once done.
RUNS: list[str] = []


@task(takes_context=True)
def fenced_write(context: LedgerTaskContext, name: str) -> Any:
    with effects(context) as fx:
        if fx.done:
            return fx.result
        RUNS.append(name)
        Group.objects.using(fx.database).create(name=f"{name}:{context.fence}")
        return fx.save({"wrote": name})
