"""``manage.py ledger_relay``: deliver the outbox rows a crash or an outage left behind.

``--once`` (the default) drains the outbox and exits; ``--loop`` keeps delivering until
SIGTERM or Ctrl-C; ``--prune-effects DAYS`` also deletes fenced-effects rows older than
DAYS. ``ledger_worker`` beats the same relay beside repair unless ``--no-relay``.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.utils.translation import gettext, gettext_lazy

from ...services.relay import DEFAULT_BATCH, DEFAULT_INTERVAL, Relay, outbox_databases
from ..base import LedgerCommand, signals_handled


class Command(LedgerCommand):
    help = gettext_lazy(
        "Deliver the tasks waiting in the transactional outbox (see 'Transactions' in "
        "the django-ledger docs)."
    )  # type: ignore[assignment]  # lazy: the language of each run

    def add_arguments(self, parser: CommandParser) -> None:
        mode = parser.add_mutually_exclusive_group()
        mode.add_argument(
            "--once", action="store_true", help=gettext("drain the outbox, then exit")
        )
        mode.add_argument(
            "--loop", action="store_true", help=gettext("keep delivering until stopped")
        )
        parser.add_argument(
            "--batch",
            type=int,
            default=DEFAULT_BATCH,
            help=gettext("rows per batch (%(default)s)") % {"default": DEFAULT_BATCH},
        )
        parser.add_argument(
            "--interval",
            type=float,
            default=DEFAULT_INTERVAL,
            help=(
                gettext("seconds between looks at an empty outbox with --loop (%(default)s)")
                % {"default": DEFAULT_INTERVAL}
            ),
        )
        parser.add_argument(
            "--database",
            action="append",
            default=None,
            help=gettext(
                "a database alias to serve (repeatable; default: those of TASKS' backends)"
            ),
        )
        parser.add_argument(
            "--prune-effects",
            type=float,
            default=None,
            metavar="DAYS",
            help=gettext("also delete fenced-effects rows not written for DAYS days"),
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["batch"] < 1:
            raise CommandError(gettext("--batch must be at least 1"))
        if options["prune_effects"] is not None and not options["prune_effects"] > 0:
            raise CommandError(gettext("--prune-effects must be more than 0 days"))
        databases = options["database"] or outbox_databases()
        if not databases:
            raise CommandError(
                gettext("no outbox to relay: no LedgerBackend of TASKS has TRANSACTIONS 'outbox'")
            )
        relay = Relay(
            databases,
            batch=options["batch"],
            interval=options["interval"],
            prune_days=options["prune_effects"],
        )
        if not options["loop"]:
            delivered = relay.run_once()
            pruned = relay.prune()
            self.stdout.write(gettext("delivered %(delivered)s task(s)") % {"delivered": delivered})
            if options["prune_effects"] is not None:
                self.stdout.write(gettext("pruned %(pruned)s effects row(s)") % {"pruned": pruned})
            return
        with signals_handled(lambda signum, frame: relay.stop.set()):
            relay.run()
