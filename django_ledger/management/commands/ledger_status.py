"""``manage.py ledger_status``: each queue's slot, master and counters, and crowded masters."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError, CommandParser
from django.utils.translation import gettext, gettext_lazy

from django_ledger.conf import get_ledger
from django_ledger.core.errors import LedgerError
from django_ledger.services.health import probe, probe_scheduler
from django_ledger.services.placement import (
    Placement,
    crowded_masters,
    crowding_hint,
    place_queues,
)

from ..base import LedgerCommand, refused

COLUMNS = ("queue", "slot", "master", "due", "later", "claimed", "ended", "quarantined", "gate")


class Command(LedgerCommand):
    help = gettext_lazy(
        "Show where each queue lives (its Redis Cluster slot and the master serving "
        "it; a row per shard of a sharded queue) with its counters, and a hint when "
        "two busy queues or shards share one master. --demand QUEUE prints one "
        "number instead: the queue's records due now plus those running, what an "
        "autoscaler scales workers on."
    )  # type: ignore[assignment]  # lazy: the language of each run
    # An exec probe and an autoscaler run this every few seconds, and it only reads
    # Redis: the project's system checks (which load every URL configuration, the admin
    # and the API) are the worker's, at its start, and manage.py check's.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--queue",
            action="append",
            default=[],
            help=gettext("a queue to show (repeatable; default all)"),
        )
        parser.add_argument(
            "--busy",
            type=int,
            default=1,
            help=gettext("live records (pending or claimed) that make a queue busy (default 1)"),
        )

        parser.add_argument(
            "--demand",
            metavar="QUEUE",
            help=gettext(
                "print only the demand of QUEUE (records due now plus records running, "
                "every shard summed), as the API's stats answer it"
            ),
        )

        parser.add_argument(
            "--worker",
            metavar="ID",
            help=gettext(
                "check worker ID only: exit 1 when it has no heartbeat, or its loop has not "
                "turned within --max-age (an exec probe)"
            ),
        )
        parser.add_argument(
            "--worker-of",
            metavar="QUEUE",
            help=gettext("check the workers of QUEUE the same way: exit 1 unless one is fresh"),
        )
        parser.add_argument(
            "--scheduler",
            metavar="NODE",
            help=gettext(
                "check scheduler NODE (its --node-id): exit 1 unless it ticked within "
                "--max-age (an exec probe)"
            ),
        )
        parser.add_argument(
            "--max-age",
            type=float,
            default=60.0,
            metavar="SECONDS",
            help=gettext(
                "how long a fresh worker's loop may go without turning, or a scheduler "
                "without ticking (default 60)"
            ),
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["demand"] is not None:
            self.stdout.write(str(_demand(options["demand"])))
            return
        if options["scheduler"] is not None:
            self.stdout.write(probe_scheduler(options["scheduler"], options["max_age"]))
            return
        if options["worker"] is not None or options["worker_of"] is not None:
            self.stdout.write(probe(options["worker"], options["worker_of"], options["max_age"]))
            return
        if options["busy"] < 1:
            raise CommandError(gettext("--busy must be at least 1"))
        with refused(ImproperlyConfigured):
            placed = place_queues(options["queue"])
        rows = [COLUMNS, *(_row(placement) for placement in placed)]
        widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
        for row in rows:
            self.stdout.write(
                "  ".join(
                    cell.ljust(width) for cell, width in zip(row, widths, strict=True)
                ).rstrip()
            )
        for placement in placed:
            if placement.error is not None:
                self.stderr.write(
                    gettext("queue %(queue)s: %(error)s")
                    % {"queue": placement.name, "error": placement.error}
                )
        read = [placement for placement in placed if placement.error is None]
        if read and all(placement.slot is None for placement in read):
            self.stdout.write(gettext("one Redis server: every queue is on it (no cluster slots)."))
        for node, queues in crowded_masters(placed, options["busy"]).items():
            self.stdout.write(self.style.WARNING(crowding_hint(node, queues)))
        if any(placement.error is not None for placement in placed):
            raise CommandError(gettext("some queues could not be read (above)"))


def _row(placement: Placement) -> tuple[str, ...]:
    slot = "-" if placement.slot is None else str(placement.slot)
    stats = placement.stats
    if stats is None:
        return (placement.name, slot, placement.node, *("?" * 6))
    ended = stats.completed + stats.failed + stats.dead
    gate = "closed" if stats.gate_closed else "open"
    counts = (stats.pending_due, stats.pending_later, stats.claimed, ended, stats.quarantined)
    return (placement.name, slot, placement.node, *(str(n) for n in counts), gate)


def _demand(queue: str) -> int:
    """Queue ``queue``'s demand, read from Redis (no worker needs to run)."""
    try:
        return get_ledger(queue).stats().demand
    except ImproperlyConfigured as exc:
        raise CommandError(str(exc)) from exc
    except LedgerError as exc:
        raise CommandError(
            gettext("queue %(queue)s: %(error)s") % {"queue": queue, "error": exc}
        ) from exc
