"""The repair loop: whole repair cycles, one after another, beside the workers.

Log lines: ``R`` followed by the counts of one finished cycle as ``name=value`` pairs,
and ``E unavailable`` (the cycle then starts again from the page it was on).
"""

from __future__ import annotations

import time

from django_ledger import RepairReport
from tests.support.harness.agent import Agent

__all__ = ["run"]


def run(agent: Agent) -> None:
    config = agent.config
    while not agent.stopping:
        cycle = RepairReport()
        cursor = "0"
        while not agent.stopping:
            page = agent.patiently(
                lambda cursor=cursor: agent.ledger.repair_page(cursor, config.repair_page)
            )
            if page is None:
                break
            cycle.add(page)
            cursor = page.cursor
            if cursor == "0":
                counts = "\t".join(f"{name}={value}" for name, value in cycle.counts().items())
                agent.log([f"R\t{counts}"])
                break
        time.sleep(config.repair_pause)
