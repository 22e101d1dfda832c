"""Repair cycles over configured queues, page by page, stoppable between pages."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..conf import get_ledger, ledger_settings
from ..core.errors import LedgerError
from ..core.results import RepairReport
from ..core.sharded import AnyLedger

__all__ = ["QueueRepair", "configured_queues", "repair_queue", "repair_queues"]


def configured_queues(requested: Iterable[str] = ()) -> list[str]:
    """Return the requested queues (all configured ones if none), refusing unknown names."""
    names = list(dict.fromkeys(requested)) or ledger_settings.queue_names
    for name in names:
        ledger_settings.queue(name)  # raises ImproperlyConfigured naming the known ones
    return names


@dataclass
class QueueRepair:
    """One repair cycle of one queue: what it did, and whether it went all the way."""

    queue: str
    report: RepairReport = field(default_factory=RepairReport)
    total: int = 0  # records in the queue when the cycle began (HLEN, of every shard)
    pages: int = 0
    complete: bool = False  # reached the end of the scan (cursor "0")
    error: str | None = None


PageCallback = Callable[[QueueRepair, RepairReport], None]


def repair_queue(
    ledger: AnyLedger,
    count: int = 100,
    *,
    should_stop: Callable[[], bool] = lambda: False,
    on_page: PageCallback | None = None,
) -> QueueRepair:
    """Run one full repair cycle over ``ledger``, page by page.

    ``should_stop`` is asked between pages: a stop never cuts a page in half. A
    ``LedgerError`` (Redis down, ...) ends the cycle and is reported in ``error``.
    """
    result = QueueRepair(ledger.queue)
    try:
        with ledger.translate_errors():
            # A sharded queue's records: every shard's (one HLEN each).
            result.total = sum(int(shard.redis.hlen(shard.records_key)) for shard in ledger.shards)
        cursor = "0"
        while True:
            page = ledger.repair_page(cursor, count)
            result.report.add(page)
            result.pages += 1
            if on_page is not None:
                on_page(result, page)
            cursor = page.cursor
            if cursor == "0":
                result.complete = True
                break
            if should_stop():
                break
    except LedgerError as exc:
        result.error = str(exc)
    return result


def repair_queues(
    queues: Iterable[str],
    count: int = 100,
    *,
    should_stop: Callable[[], bool] = lambda: False,
    on_page: PageCallback | None = None,
) -> list[QueueRepair]:
    """Run one repair cycle over each queue in turn; stop between pages when asked."""
    results = []
    for name in configured_queues(queues):
        if should_stop():
            break
        try:
            # Building the ledger reads the queue's layout: Redis down fails it here.
            ledger = get_ledger(name)
        except LedgerError as exc:
            results.append(QueueRepair(name, error=str(exc)))
            continue
        results.append(repair_queue(ledger, count, should_stop=should_stop, on_page=on_page))
    return results
