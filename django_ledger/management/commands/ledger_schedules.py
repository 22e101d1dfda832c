"""``manage.py ledger_schedules``: list schedules; add, edit, pause, resume, delete stored ones."""

from __future__ import annotations

import getpass
import json
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError, CommandParser
from django.utils.translation import gettext, gettext_lazy, gettext_noop

from django_ledger.core.errors import LedgerError
from django_ledger.services import runtime_schedules as runtime
from django_ledger.services import scheduler
from django_ledger.services.schedule_rows import row, rows

from ..base import LedgerCommand

#: Option -> stored field, how its text is read, and its help (``--args`` and ``--kwargs``
#: keep ``task_``: ``args`` is call_command's own name).
_OPTIONS: dict[str, tuple[str, Any, str]] = {
    "task": ("TASK", str, gettext_noop("dotted path of the task")),
    "cron": ("CRON", str, gettext_noop("a cron expression")),
    "every": ("EVERY", int, gettext_noop("an interval, in seconds")),
    "at": ("AT", str, gettext_noop("one time (ISO 8601): a one-off schedule")),
    "timezone": ("TIMEZONE", str, gettext_noop("an IANA time zone")),
    "task_args": ("ARGS", json.loads, gettext_noop("positional arguments, a JSON list")),
    "task_kwargs": ("KWARGS", json.loads, gettext_noop("keyword arguments, a JSON object")),
    "queue": ("QUEUE", str, gettext_noop("the queue fires go to")),
    "priority": ("PRIORITY", int, gettext_noop("-100 to 100")),
    "misfire": ("MISFIRE", str, gettext_noop("'latest', 'all' or 'skip'")),
    "grace": ("GRACE", int, gettext_noop("seconds a missed fire may be late")),
}
_TIMINGS = ("CRON", "EVERY", "AT")


class Command(LedgerCommand):
    help = gettext_lazy(
        "List every schedule (settings' and stored), or add, edit, pause, resume or delete "
        "a stored one: every running ledger_scheduler picks the change up at its next tick."
    )  # type: ignore[assignment]  # lazy: the language of each run

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        actions.add_parser("list", help=gettext("list every schedule"))
        helps = {
            "add": gettext("add a stored schedule"),
            "edit": gettext("edit a stored schedule (what you do not give is kept)"),
            "pause": gettext("pause a schedule on every scheduler"),
            "resume": gettext("resume a paused schedule"),
            "delete": gettext("delete a stored schedule"),
        }
        for name in ("add", "edit"):
            sub = actions.add_parser(name, help=helps[name])
            sub.add_argument("key", help=gettext("the schedule's key"))
            for option, (_, _, text) in _OPTIONS.items():
                flag = "--" + option.removeprefix("task_")
                sub.add_argument(flag, dest=option, help=gettext(text))
            sub.add_argument("--disabled", action="store_true", help=gettext("keep it unfired"))
            if name == "edit":
                sub.add_argument("--enabled", action="store_true", help=gettext("fire it again"))
                sub.add_argument("--version", type=int, help=gettext("the version you read"))
        for name in ("pause", "resume", "delete"):
            sub = actions.add_parser(name, help=helps[name])
            sub.add_argument("key", help=gettext("the schedule's key"))
            if name == "delete":
                sub.add_argument("--version", type=int, help=gettext("the version you read"))

    def handle(self, *args: Any, **options: Any) -> None:
        action, by = options["action"], f"{getpass.getuser()} (ledger_schedules)"
        try:
            if action == "list":
                self._list()
            elif action == "add":
                found = runtime.create(options["key"], _entry(options, {}), by)
                self._saved(found.key, found.version)
            elif action == "edit":
                old = row(options["key"])
                found = runtime.edit(
                    options["key"], _entry(options, old.entry), by, options["version"]
                )
                self._saved(found.key, found.version)
            elif action == "pause":
                row(options["key"])
                scheduler.pause(options["key"], by)
                runtime.logger.info("schedule %r paused by %s", options["key"], by)
                self.stdout.write(gettext("paused %(key)s") % {"key": options["key"]})
            elif action == "resume":
                row(options["key"])
                scheduler.resume(options["key"])
                runtime.logger.info("schedule %r resumed by %s", options["key"], by)
                self.stdout.write(gettext("resumed %(key)s") % {"key": options["key"]})
            else:
                runtime.delete(options["key"], by, options["version"])
                self.stdout.write(gettext("deleted %(key)s") % {"key": options["key"]})
        except runtime.ScheduleInvalid as exc:
            lines = [f"{name}: {word}" for name, words in exc.errors.items() for word in words]
            raise CommandError("\n".join([gettext("not saved:"), *lines])) from exc
        except runtime.VersionConflict as exc:
            raise CommandError(
                gettext(
                    "Another change to schedule %(key)s was saved first (it is at version "
                    "%(current)s): read it again."
                )
                % {"key": exc.key, "current": exc.current}
            ) from exc
        except (
            runtime.RuntimeSchedulesOff,
            LookupError,
            ValueError,
            ImproperlyConfigured,
            LedgerError,
        ) as exc:
            raise CommandError(str(exc.args[0] if exc.args else exc)) from exc

    def _saved(self, key: str, version: int) -> None:
        self.stdout.write(
            gettext("saved %(key)s (version %(version)s)") % {"key": key, "version": version}
        )

    def _list(self) -> None:
        for found in rows():
            timing = next((f"{n}={found.entry[n]}" for n in _TIMINGS if n in found.entry), "")
            state = [found.source]
            if found.version is not None:
                state.append(gettext("version %(version)s") % {"version": found.version})
            if found.paused:
                state.append(gettext("paused"))
            if found.done:
                state.append(gettext("done"))
            if found.why_not:
                state.append(found.why_not)
            self.stdout.write(
                f"{found.key}  {found.entry.get('TASK')}  {timing}  ({', '.join(state)})"
            )


def _entry(options: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """The stored fields: ``base`` with the options given over it."""
    entry = dict(base)
    for option, (name, read, _) in _OPTIONS.items():
        text = options.get(option)
        if text is None:
            continue
        try:
            value = read(text)
        except ValueError as exc:
            raise runtime.ScheduleInvalid({name: [str(exc)]}) from exc
        if name in _TIMINGS:
            for other in _TIMINGS:
                entry.pop(other, None)
        entry[name] = value
    if options.get("disabled"):
        entry["ENABLED"] = False
    elif options.get("enabled"):
        entry["ENABLED"] = True
    return entry
