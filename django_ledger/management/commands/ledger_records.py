"""``manage.py ledger_records ACTION --queue Q --state S --task T --ended-after ...``:
retry, fail, purge or cancel everything a filter matches, in pages, with a progress bar
on a terminal."""

from __future__ import annotations

import getpass
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandParser
from django.utils.translation import gettext, gettext_lazy, ngettext

from django_ledger.core.bulk import ACTIONS
from django_ledger.core.errors import LedgerError
from django_ledger.services.bulk import BulkRun, load_run, preview, start_run, step_run
from django_ledger.services.bulk_filter import BulkRefused, parse_filter

from ..base import LedgerCommand, refused

#: Width of the progress bar, in characters.
BAR = 30


class Command(LedgerCommand):
    help = gettext_lazy(
        "Retry, fail, purge or cancel every record a filter matches (queue, states, task, "
        "time ranges), a page at a time; each record changes only if it is still what was "
        "matched, and one that moved on meanwhile is skipped and counted. A run that stops "
        "can be resumed with --resume."
    )  # type: ignore[assignment]  # lazy: the language of each run

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=ACTIONS, help=gettext("what to do to each record"))
        parser.add_argument(
            "--queue", default="default", help=gettext("the queue (default: default)")
        )
        parser.add_argument(
            "--state",
            action="append",
            dest="states",
            metavar="STATE",
            help=gettext(
                "a state to act on (repeat for several; default: every state the action applies to)"
            ),
        )
        parser.add_argument(
            "--task", default=None, help=gettext("only records of this task (its dotted path)")
        )
        for name, what in (
            ("due", gettext("due time (PENDING records)")),
            ("lease", gettext("lease expiry (CLAIMED records)")),
            ("ended", gettext("end time (COMPLETED, FAILED, DEAD records)")),
        ):
            parser.add_argument(
                f"--{name}-after",
                default=None,
                metavar="TIME",
                help=gettext("%(what)s at or after this time (ISO 8601 in UTC, or epoch ms)")
                % {"what": what},
            )
            parser.add_argument(
                f"--{name}-before",
                default=None,
                metavar="TIME",
                help=gettext("%(what)s at or before this time (ISO 8601 in UTC, or epoch ms)")
                % {"what": what},
            )
        parser.add_argument(
            "--preview", action="store_true", help=gettext("only count what matches")
        )
        parser.add_argument(
            "--resume", default=None, metavar="RUN", help=gettext("resume this run")
        )
        parser.add_argument(
            "--take-over",
            action="store_true",
            help=gettext("with --resume: take the run over from a stepper that died"),
        )
        parser.add_argument("--reason", default="", help=gettext("why (kept with a cancel)"))
        parser.add_argument(
            "--by", default=None, help=gettext("who acts (default: the user running this)")
        )
        parser.add_argument(
            "--page", type=int, default=500, help=gettext("records looked at per page (1 to 1000)")
        )

    def handle(self, *args: Any, **options: Any) -> None:
        queue = options["queue"]
        with refused(BulkRefused, LedgerError, ValueError, ImproperlyConfigured):
            if options["resume"]:
                run = load_run(queue, options["resume"])
                if run.filter.action != options["action"]:
                    raise BulkRefused(
                        gettext("run %(run)s is a %(action)s run")
                        % {"run": run.id, "action": run.filter.action}
                    )
            else:
                spec = parse_filter(
                    queue,
                    options["action"],
                    may=lambda permission, name: True,  # whoever runs manage.py operates
                    states=options["states"],
                    task=options["task"],
                    bounds={
                        "due_at": (options["due_after"], options["due_before"]),
                        "lease_until": (options["lease_after"], options["lease_before"]),
                        "updated_at": (options["ended_after"], options["ended_before"]),
                    },
                )
                if options["preview"]:
                    count = preview(spec)
                    self.stdout.write(
                        ngettext("%(count)d record matches", "%(count)d records match", count)
                        % {"count": count}
                    )
                    return
                by = options["by"] or f"{getpass.getuser()} (ledger_records)"
                run = start_run(spec, by=by, reason=options["reason"])
                self.stdout.write(
                    gettext("run %(run)s: %(count)d records match; resume with --resume %(run)s")
                    % {"run": run.id, "count": run.matched}
                )
            tty = self.stdout.isatty()
            while not run.finished:
                run = step_run(
                    queue,
                    run.id,
                    page=options["page"],
                    take_over=options["take_over"],
                    progress=self._bar if tty else None,
                )
            if tty:
                self.stdout.write("")
        self.stdout.write(
            gettext("%(action)s: %(done)d done, %(skipped)d skipped (moved on meanwhile)")
            % {"action": run.filter.action, "done": run.done, "skipped": run.skipped}
        )

    def _bar(self, run: BulkRun) -> None:
        total = max(run.matched, run.seen, 1)
        filled = BAR * min(run.seen, total) // total
        self.stdout.write(f"\r[{'#' * filled}{'.' * (BAR - filled)}] {run.seen}/{total}", ending="")
        self.stdout.flush()
