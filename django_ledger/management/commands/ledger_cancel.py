"""``manage.py ledger_cancel QUEUE ID [ID ...]``: cancel records, queued or running."""

from __future__ import annotations

import getpass
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError, CommandParser
from django.utils.translation import gettext, gettext_lazy, ngettext

from django_ledger.core.errors import LedgerError
from django_ledger.services.cancelling import cancel_record

from ..base import LedgerCommand


class Command(LedgerCommand):
    help = gettext_lazy(
        "Cancel records of a queue, queued or running: each ends FAILED and never runs "
        "again; a running one's settlement and fenced effects are refused. Exits 0 when "
        "every id was cancelled or had ended already, 1 otherwise."
    )  # type: ignore[assignment]  # lazy: the language of each run

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("queue", help=gettext("the queue that holds the records"))
        parser.add_argument("ids", nargs="+", metavar="id", help=gettext("request ids to cancel"))
        parser.add_argument(
            "--reason", default="", help=gettext("why, kept with each record (up to 500 bytes)")
        )
        parser.add_argument(
            "--by", default=None, help=gettext("who cancels (default: the user running this)")
        )
        parser.add_argument(
            "--database",
            default="default",
            help=gettext("the database of the tasks' fenced effects (default: default)"),
        )

    def handle(self, *args: Any, **options: Any) -> None:
        queue, reason = options["queue"], options["reason"]
        by = options["by"] or f"{getpass.getuser()} (ledger_cancel)"
        failed = 0
        for request_id in options["ids"]:
            try:
                outcome = cancel_record(
                    queue, request_id, by=by, reason=reason, database=options["database"]
                )
            except ImproperlyConfigured as exc:
                raise CommandError(str(exc)) from exc
            except (ValueError, TypeError, LedgerError) as exc:
                self.stderr.write(
                    gettext("%(id)s: refused: %(error)s") % {"id": request_id, "error": exc}
                )
                failed += 1
                continue
            if outcome.status == "cancelled":
                line = gettext("%(id)s: cancelled (it was %(was)s; fence %(fence)s)")
            elif outcome.status == "ended":
                line = gettext("%(id)s: had already ended as %(was)s; left as it is")
            else:
                failed += 1
                line = {
                    "missing": gettext("%(id)s: no such record in this queue"),
                    "corrupt": gettext("%(id)s: corrupt or quarantined; nothing done"),
                    "changed": gettext("%(id)s: changed meanwhile; nothing done"),
                }[outcome.status]
            values = {"id": request_id, "was": outcome.was, "fence": outcome.fence}
            (self.stdout if outcome.status in ("cancelled", "ended") else self.stderr).write(
                line % values
            )
        if failed:
            total = len(options["ids"])
            raise CommandError(
                ngettext(
                    "%(failed)d of %(total)d id not cancelled",
                    "%(failed)d of %(total)d ids not cancelled",
                    total,
                )
                % {"failed": failed, "total": total}
            )
