"""``manage.py ledger_limits QUEUE``: show or change a queue's flow limits, no restart."""

from __future__ import annotations

import getpass
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandParser
from django.utils.translation import gettext, gettext_lazy

from django_ledger.core.errors import LedgerError
from django_ledger.services.limits import KEEP, LimitChange, change_limits, describe, parse_rate

from ..base import LedgerCommand, refused


class Command(LedgerCommand):
    help = gettext_lazy(
        "Show a queue's flow limits (stored in Redis, the settings their default) and "
        "their use now: tokens left, slots taken. --rate and --concurrency change them "
        "for every worker from its next claim; --reset puts the settings' limits back."
    )  # type: ignore[assignment]  # lazy: the language of each run

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("queue", help=gettext("the queue (a key of LEDGER['QUEUES'])"))
        parser.add_argument(
            "--rate", help=gettext("LIMIT/PERIOD[/BURST]: at most LIMIT claims per PERIOD seconds")
        )
        parser.add_argument("--concurrency", type=int, help=gettext("at most N claimed at once"))
        parser.add_argument("--no-rate", action="store_true", help=gettext("remove the rate limit"))
        parser.add_argument(
            "--no-concurrency", action="store_true", help=gettext("remove the concurrency limit")
        )
        parser.add_argument(
            "--reset", action="store_true", help=gettext("put the settings' limits back first")
        )

    def handle(self, *args: Any, **options: Any) -> None:
        with refused(ValueError, ImproperlyConfigured, LedgerError):
            change = _change(options)
            use = change_limits(options["queue"], change, actor=getpass.getuser())
        self.stdout.write(
            gettext("queue %(queue)s: %(value)s")
            % {"queue": options["queue"], "value": describe(use.limits)}
        )
        if use.source:
            self.stdout.write(gettext("set by: %(source)s") % {"source": use.source})
        if use.limits.rate is not None and use.tokens_left is not None:
            self.stdout.write(
                gettext("tokens left: %(tokens_left)s of %(burst)s")
                % {"tokens_left": f"{use.tokens_left:g}", "burst": use.limits.rate.burst}
            )
        taken = gettext("slots taken: %(taken)s") % {"taken": use.slots_taken}
        if use.limits.concurrency is not None and use.limits.key is None:
            taken = gettext("slots taken: %(taken)s of %(limit)s") % {
                "taken": use.slots_taken,
                "limit": use.limits.concurrency,
            }
        self.stdout.write(taken)
        self.stdout.write(
            gettext("due now: %(due_now)s, held by the limits: %(held)s")
            % {"due_now": use.due_now, "held": use.held}
        )
        if use.limits.key is not None:
            self.stdout.write(
                gettext("keys waiting: %(keys_waiting)s") % {"keys_waiting": use.keys_waiting}
            )
            for row in use.keys:
                values = {"key": row.key, "due": row.due, "slots_taken": row.slots_taken}
                if row.tokens_left is None:
                    line = gettext("%(key)r: due %(due)s, slots taken %(slots_taken)s")
                else:
                    values["tokens"] = f"{row.tokens_left:g}"
                    line = gettext(
                        "%(key)r: due %(due)s, slots taken %(slots_taken)s, tokens left %(tokens)s"
                    )
                self.stdout.write("  " + line % values)


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
