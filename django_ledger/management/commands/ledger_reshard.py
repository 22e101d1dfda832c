"""``manage.py ledger_reshard``: move a queue's records to the number of shards its setting gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError, CommandParser
from django.utils.translation import gettext, gettext_lazy

from django_ledger.core.errors import LedgerError
from django_ledger.services.reshard import reshard_queue

from ..base import LedgerCommand


class Command(LedgerCommand):
    help = gettext_lazy(
        "Lay a queue's records out again in the number of shards "
        "LEDGER['QUEUES'][name]['SHARDS'] now gives: with the gate closed and no "
        "record claimed, write every record to a backup file, delete the old shards, "
        "import the file into the new ones and read every record back. Stop the "
        "queue's workers first."
    )  # type: ignore[assignment]  # lazy: the language of each run

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--queue", default="default", help=gettext("the queue (default: default)")
        )
        parser.add_argument(
            "--backup",
            required=True,
            help=gettext(
                "a new file that receives every record first (JSON Lines, as ledger_export)"
            ),
        )
        parser.add_argument(
            "--yes", action="store_true", help=gettext("do it (without it: say what would be done)")
        )

    def handle(self, *args: Any, **options: Any) -> None:
        queue, backup = options["queue"], Path(options["backup"])
        try:
            result = reshard_queue(queue, backup, dry_run=not options["yes"])
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from exc
        except LedgerError as exc:
            message = f"queue {queue!r}: {exc}"
            if backup.exists() and not str(exc).endswith("nothing was changed"):
                message += (
                    ". The backup holds every record; with Redis back, finish with: "
                    f"python manage.py ledger_import --queue {queue} {backup}"
                )
            raise CommandError(message) from exc
        if result.before == result.after:
            self.stdout.write(
                gettext("queue %(queue)s is laid out in %(after)s shard(s) already")
                % {"queue": queue, "after": result.after}
            )
            return
        plan = (
            f"queue {queue}: {result.records} record(s) from {result.before} shard(s) "
            f"to {result.after}"
        )
        if not options["yes"]:
            self.stdout.write(
                gettext("would move %(plan)s, backup in %(backup)s; run again with --yes")
                % {"plan": plan, "backup": backup}
            )
            return
        imported = result.imported
        if imported is None or not imported.ok:
            problems = (
                []
                if imported is None
                else imported.bad_lines + imported.conflicts + imported.failed
            )
            raise CommandError(
                gettext(
                    "moved %(plan)s, but the import did not agree line for line (%(count)s "
                    "problem(s), first: %(problems)s); the gate stays closed; fix and re-run: "
                    "python manage.py ledger_import --queue %(queue)s %(backup)s"
                )
                % {
                    "plan": plan,
                    "count": len(problems),
                    "problems": problems[:1],
                    "queue": queue,
                    "backup": backup,
                }
            )
        self.stdout.write(
            gettext(
                "moved %(plan)s: %(imported)s written, %(verified)s read back as exported, "
                "%(results)s stored result(s) written back; the gate %(gate)s; backup in "
                "%(backup)s"
            )
            % {
                "plan": plan,
                "imported": imported.imported,
                "verified": imported.verified,
                "results": result.results,
                "gate": imported.gate,
                "backup": backup,
            }
        )
