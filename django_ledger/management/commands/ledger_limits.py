"""``manage.py ledger_limits QUEUE``: show or change a queue's flow limits, no restart."""

from __future__ import annotations

import getpass
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_ledger.core.errors import LedgerError
from django_ledger.services.limits import KEEP, LimitChange, change_limits, describe, parse_rate


class Command(BaseCommand):
    help = (
        "Show a queue's flow limits (stored in Redis, the settings their default) and their "
        "use now: tokens left, slots taken. --rate and --concurrency change them for every "
        "worker from its next claim; --reset puts the settings' limits back."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("queue", help="the queue (a key of LEDGER['QUEUES'])")
        parser.add_argument(
            "--rate", help="LIMIT/PERIOD[/BURST]: at most LIMIT claims per PERIOD seconds"
        )
        parser.add_argument("--concurrency", type=int, help="at most N claimed at once")
        parser.add_argument("--no-rate", action="store_true", help="remove the rate limit")
        parser.add_argument(
            "--no-concurrency", action="store_true", help="remove the concurrency limit"
        )
        parser.add_argument(
            "--reset", action="store_true", help="put the settings' limits back first"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            change = _change(options)
            use = change_limits(options["queue"], change, actor=getpass.getuser())
        except (ValueError, ImproperlyConfigured, LedgerError) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"queue {options['queue']}: {describe(use.limits)}")
        if use.source:
            self.stdout.write(f"set by: {use.source}")
        if use.limits.rate is not None and use.tokens_left is not None:
            self.stdout.write(f"tokens left: {use.tokens_left:g} of {use.limits.rate.burst}")
        taken = f"slots taken: {use.slots_taken}"
        if use.limits.concurrency is not None and use.limits.key is None:
            taken += f" of {use.limits.concurrency}"
        self.stdout.write(taken)
        self.stdout.write(f"due now: {use.due_now}, held by the limits: {use.held}")
        if use.limits.key is not None:
            self.stdout.write(f"keys waiting: {use.keys_waiting}")
            for row in use.keys:
                tokens = "" if row.tokens_left is None else f", tokens left {row.tokens_left:g}"
                self.stdout.write(
                    f"  {row.key!r}: due {row.due}, slots taken {row.slots_taken}{tokens}"
                )


def _change(options: dict[str, Any]) -> LimitChange:
    if options["rate"] and options["no_rate"]:
        raise ValueError("give --rate or --no-rate, not both")
    if options["concurrency"] is not None and options["no_concurrency"]:
        raise ValueError("give --concurrency or --no-concurrency, not both")
    rate: Any = KEEP
    if options["rate"]:
        rate = parse_rate(options["rate"])
    elif options["no_rate"]:
        rate = None
    concurrency: Any = KEEP
    if options["concurrency"] is not None:
        concurrency = options["concurrency"]
        if concurrency < 1:
            raise ValueError(f"--concurrency must be 1 or more, got {concurrency}")
    elif options["no_concurrency"]:
        concurrency = None
    return LimitChange(rate, concurrency, options["reset"])
