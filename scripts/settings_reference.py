"""Write docs/settings.md, the settings reference, from the code.

    python scripts/settings_reference.py           # write the page
    python scripts/settings_reference.py --check   # exit 1 if the page is out of date

Defaults come from ``django_ledger/defaults.py`` (and the task backend's, the outbox's and
the REST API's defaults), bounds from its ``LIMITS``; what each key means and the system
checks that guard it are written below, one entry per key. A key the code defines that
has no entry here, or an entry naming a check id the code never emits, stops the script:
the page cannot leave a setting out (tests/project/test_settings_reference.py runs it).
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "settings.md"
PACKAGE = ROOT / "django_ledger"

# Run from a checkout: the package next to this script, not another one installed.
sys.path.insert(0, str(ROOT))

from django_ledger import defaults as setting  # noqa: E402
from django_ledger.outbox.options import TRANSACTION_OPTION_DEFAULTS  # noqa: E402
from django_ledger.tasks.options import BACKEND_OPTION_DEFAULTS  # noqa: E402

# The REST API's defaults live with the API (django_ledger/api/conf.py), which reads the
# Django settings when imported; read its literal instead.


def _literal_dict(path: Path, name: str) -> dict[str, Any]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if (
            isinstance(node, ast.AnnAssign | ast.Assign)
            and node.value is not None
            and any(
                isinstance(target, ast.Name) and target.id == name
                for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            )
        ):
            value = ast.literal_eval(node.value)
            assert isinstance(value, dict)
            return value
    raise SystemExit(f"{path}: no {name} found")


API_DEFAULTS = _literal_dict(PACKAGE / "api" / "conf.py", "API_DEFAULTS")

_CHECK_ID = re.compile(r"django_ledger\.[EWI]\d{3}")
_ERROR_MAKERS = {"error", "_error", "Problem"}


def emitted_check_ids(package: Path = PACKAGE) -> set[str]:
    """Every system check id the code can emit.

    An id is either written whole (``id="django_ledger.W001"``) or made from a number by
    ``checks.base.error`` (imported as ``_error``) or a schedule's ``Problem``: the
    first argument of such a call, a literal int, is ``django_ledger.E<number>``.
    """
    found: set[str] = set()
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.update(_CHECK_ID.findall(node.value))
            elif isinstance(node, ast.Call) and node.args:
                func = node.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                first = node.args[0]
                if (
                    name in _ERROR_MAKERS
                    and isinstance(first, ast.Constant)
                    and type(first.value) is int
                ):
                    found.add(f"django_ledger.E{first.value:03d}")
    return found


# Entry: (type, meaning, bounds when not in a Limit, check ids).
Entry = tuple[str, str, str, tuple[str, ...]]

_DURATION = "timedelta or seconds"
_CONNECTION = (
    "E010",
    "E011",
    "E012",
    "E013",
    "E014",
)

TOP: dict[str, Entry] = {
    "CONNECTION": (
        "str or dict",
        "Where the ledger's Redis is: a django-redis cache alias, a `redis://`, "
        "`rediss://` or `unix://` URL, or `{'CLUSTER': ['host:port', ...]}`.",
        "",
        _CONNECTION,
    ),
    "NAMESPACE": (
        "str",
        "The first part of every key the ledger writes; two projects on one Redis need two.",
        "1 to 100 characters, no whitespace, braces or control characters",
        ("E005",),
    ),
    "QUEUES": (
        "dict",
        "The queues, by name: each entry overrides `DEFAULTS` for that queue "
        "(see [A queue's entry](#a-queues-entry)); `{}` or `None` takes every default.",
        "at least one queue; a name as `NAMESPACE`",
        ("E003", "E004"),
    ),
    "COUNTERS": (
        "bool",
        "Workers keep outcome counters for the admin's charts.",
        "`True` or `False`",
        ("E007",),
    ),
    "RUNTIME_SCHEDULES": (
        "bool",
        "Schedules stored at run time (admin, API, `ledger_schedules`) fire and may be "
        "changed; `False` turns them off (see [the scheduler](scheduler.md#schedules-at-run-time)).",
        "`True` or `False`",
        ("E008",),
    ),
    "DEFAULTS": (
        "dict",
        "What every queue gets unless its entry says otherwise (see [DEFAULTS](#defaults)).",
        "",
        ("E002", "E003"),
    ),
    "DISPATCH": (
        "dict",
        "The dispatch registry (see [DISPATCH](#dispatch)).",
        "",
        ("E002", "E003"),
    ),
    "API": (
        "dict",
        "The REST API's settings (see [API](#api)).",
        "",
        ("E003",),
    ),
    "TIMEOUTS": (
        "dict",
        "Redis client time-outs (see [TIMEOUTS](#timeouts)).",
        "",
        ("E002", "E003"),
    ),
    "SCHEDULES": (
        "dict",
        "The scheduler's schedules, by key (see [SCHEDULES](#schedules)).",
        "",
        ("E070", "E071"),
    ),
    "DURABILITY": (
        "dict",
        "Replicas each write waits for (see [DURABILITY](#durability)).",
        "",
        ("E002", "E003"),
    ),
}

QUEUE: dict[str, Entry] = {
    "MAX_PAYLOAD_BYTES": ("int", "The largest payload a queue admits, in bytes.", "", ("E030",)),
    "MAX_RECORDS": (
        "int",
        "The most records a queue holds; past it admission is FULL.",
        "",
        ("E030",),
    ),
    "OPTIMIZED": (
        "bool",
        "Fused scripts; `False`: the reference path (the contract's operations only: "
        "no workflows or flow limits).",
        "",
        ("E030", "E102"),
    ),
    "MAX_ATTEMPTS": ("int", "Claims a record may have before it is DEAD.", "", ("E030",)),
    "MAX_RETAINED": ("int", "Ended records kept; the oldest go first.", "", ("E030",)),
    "RETENTION": (
        _DURATION,
        "How long an ended record is kept (and a duplicate refused).",
        "",
        ("E030",),
    ),
    "LEASE": (
        _DURATION,
        "How long a claim holds a record before it may be claimed again.",
        "",
        ("E030",),
    ),
    "SHARDS": (
        "int",
        "Hash tags (cluster slots) the queue is spread over.",
        "",
        ("E030", "E101"),
    ),
    "GROUPS": (
        "list of str",
        "Auth groups whose members may reach the queue (admin, API); none: every permitted user.",
        "group names",
        ("E006",),
    ),
    "HANDLER": (
        "str",
        "Dotted path of the function the worker calls with each raw job (a raw queue).",
        "a callable that imports",
        ("E080", "E081"),
    ),
    "BACKOFF_BASE": (
        _DURATION,
        "A task's first retry delay, doubled on each retry.",
        "more than 0; at most `BACKOFF_CAP`",
        ("E063",),
    ),
    "BACKOFF_CAP": (
        _DURATION,
        "The longest retry delay of a task.",
        "more than 0, at most 100 years",
        ("E063",),
    ),
    "RETRY_ON": (
        "list of exception classes or dotted paths",
        "The exceptions a task retries on (default: any `Exception`).",
        "",
        ("E063",),
    ),
    "TIMEOUT": (_DURATION, "A task's time limit; 0: none.", "0 to 100 years", ("E063",)),
    "UNIQUE": (
        "bool",
        "A task's id is derived from the task and its arguments.",
        "`True` or `False`",
        ("E063",),
    ),
    "RATE": (
        "dict",
        "At most `LIMIT` claims per `PERIOD` (see [RATE](#rate)).",
        "",
        ("E100", "E102"),
    ),
    "CONCURRENCY": (
        "int",
        "The most records claimed at once.",
        "1 to 1,000,000,000",
        ("E100", "E102"),
    ),
    "KEY": (
        "str",
        "The path whose value the limits hold per (e.g. `'task'`, `'kwargs.tenant_id'`).",
        "a key path",
        ("E100", "E102"),
    ),
    "KEY_LIMITS": (
        "dict",
        "Each key's own `RATE` and `CONCURRENCY`, over the queue's; needs `KEY`.",
        "",
        ("E100", "E102"),
    ),
}

RATE: dict[str, Entry] = {
    "LIMIT": ("int", "Claims per period.", "1 to 1,000,000,000", ("E100",)),
    "PERIOD": (_DURATION, "The period, default 1 second.", "0.001 seconds to 366 days", ("E100",)),
    "BURST": (
        "int",
        "Claims at once after a lull, default `LIMIT`.",
        "1 to 1,000,000,000",
        ("E100",),
    ),
}

DISPATCH: dict[str, Entry] = {
    "BACKEND": (
        "str",
        "The registry class, `RedisDispatchRegistry` or `MemoryDispatchRegistry` "
        "(one process only).",
        "a `DispatchRegistry` subclass",
        ("E020", "E021", "W003"),
    ),
    "CONNECTION": (
        "str, dict or None",
        "The registry's own Redis; `None`: the ledger's.",
        "",
        _CONNECTION,
    ),
    "NAMESPACE": ("str", "The first part of the registry's keys.", "as `NAMESPACE`", ("E005",)),
    "TTL": ("int", "Seconds a dispatch record is kept.", "", ("E030",)),
    "NODE_ID": (
        "str or None",
        "This process's name in the registry; `None`: host name and process id.",
        "non-empty",
        ("E022",),
    ),
    "GROUPS": (
        "dict",
        "Key prefix to the auth groups whose members may use the keys it starts (in the API).",
        "str to list of group names",
        ("E023",),
    ),
}

TIMEOUTS: dict[str, Entry] = {
    "CONNECT": (_DURATION, "How long a client the ledger builds waits to connect.", "", ("E015",)),
    "SOCKET": (_DURATION, "How long it waits for each reply.", "", ("E015",)),
}

DURABILITY: dict[str, Entry] = {
    "REPLICAS": (
        "int",
        "Replicas each write waits for (`WAIT`); 0: no `WAIT`.",
        "",
        ("E016", "W004"),
    ),
    "TIMEOUT": (
        _DURATION,
        "The longest wait; fewer replicas in time raise `NotReplicated`.",
        "",
        ("E016",),
    ),
}

SCHEDULE: dict[str, Entry] = {
    "TASK": (
        "str",
        "Dotted path of the task each fire enqueues (required).",
        "a `@task`",
        ("E073", "E090"),
    ),
    "CRON": (
        "str",
        "A cron expression (five fields, six with seconds first, or `@daily` and the like); give it or `EVERY`.",
        "parses and fires",
        ("E074", "E075"),
    ),
    "EVERY": (
        _DURATION,
        "A fixed interval instead of `CRON`, from the Unix epoch.",
        "whole seconds, 1 to 36,500 days",
        ("E074", "E076"),
    ),
    "AT": (
        "datetime or str",
        "One time instead of `CRON` or `EVERY`: a one-off schedule (ISO 8601 text is read in "
        "`TIMEZONE` unless it gives an offset).",
        "a date and time",
        ("E074", "E094"),
    ),
    "TIMEZONE": ("str", "The time zone `CRON` is read in.", "a zone `zoneinfo` knows", ("E077",)),
    "ARGS": (
        "list or tuple",
        "Positional arguments of each fire.",
        "bind to the task",
        ("E079", "E091", "E092"),
    ),
    "KWARGS": (
        "dict",
        "Keyword arguments of each fire.",
        "bind to the task",
        ("E079", "E091", "E092"),
    ),
    "QUEUE": (
        "str or None",
        "The queue fires go to; `None`: the task's own `queue_name`.",
        "in `LEDGER['QUEUES']`",
        ("E078", "E093"),
    ),
    "PRIORITY": ("int", "The priority of each fire.", "-100 to 100", ("E079",)),
    "MISFIRE": (
        "str",
        "What becomes of fires missed while no scheduler ran.",
        "`'latest'`, `'all'` or `'skip'`",
        ("E079",),
    ),
    "GRACE": (
        _DURATION,
        "For `MISFIRE` `'all'`: how old a missed fire may be and still run.",
        "",
        ("E079",),
    ),
    "ENABLED": (
        "bool",
        "`False` keeps the schedule without firing.",
        "`True` or `False`",
        ("E079",),
    ),
    "MONITOR": (
        "dict or None",
        "A cron monitor told of each fire's task: `{'URL': ...}` pinged at its start and "
        "end (healthchecks.io style), `{'SENTRY': slug}` checked in to Sentry Crons.",
        "an http(s) URL with a host; a Sentry monitor slug",
        ("E098", "E099"),
    ),
}

API: dict[str, Entry] = {
    "FULL_RETRY_AFTER": (
        "int",
        "Seconds a client is told to wait (`Retry-After`) when a queue is full.",
        "",
        (),
    ),
    "UNAVAILABLE_RETRY_AFTER": (
        "int",
        "Seconds a client is told to wait when Redis is unreachable.",
        "",
        (),
    ),
    "PAGE_SIZE": ("int", "Records per page of a listing, unless the client asks.", "", ()),
    "MAX_PAGE_SIZE": ("int", "The most records one page may hold.", "", ()),
}

OPTIONS: dict[str, Entry] = {
    "EAGER": (
        "bool",
        "Tests only: each enqueue runs what it admitted at once, in the enqueuing process "
        "([Testing](testing.md)).",
        "`True` or `False`",
        ("E061", "W067"),
    ),
    "MAX_RESULT_BYTES": (
        "int",
        "The most UTF-8 bytes a task's JSON return value may take.",
        "1 to 536,870,912, at most each queue's `MAX_PAYLOAD_BYTES`",
        ("E061", "E062"),
    ),
    "TRANSACTIONS": (
        "str",
        "What an enqueue inside `transaction.atomic()` does.",
        "`'outbox'`, `'on_commit'` or `'immediate'`",
        ("E065",),
    ),
    "DATABASE": (
        "str",
        "The database alias whose transactions an enqueue joins.",
        "an alias of `DATABASES`",
        ("E065", "W066"),
    ),
    "OUTBOX_MAX_AGE": (
        "int or float",
        "Seconds an outbox row may wait before `check --deploy` warns.",
        "more than 0",
        ("E065", "W065"),
    ),
    "OUTBOX_DELIVERY": (
        "str",
        "Who admits committed outbox rows.",
        "`'background'` or `'inline'`",
        ("E065",),
    ),
}

# Keys of a section that have no default (required, or absent unless given).
_NO_DEFAULT = "not set"


def show(value: Any) -> str:
    """A default as a settings file would write it."""
    if isinstance(value, timedelta):
        seconds = int(value.total_seconds())
        for unit, size in (("days", 86_400), ("hours", 3_600), ("minutes", 60)):
            if seconds % size == 0:
                return f"`timedelta({unit}={seconds // size})`"
        return f"`timedelta(seconds={seconds})`"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10_000:
        return f"`{value:_}`"
    return f"`{value!r}`"


def _table(
    entries: dict[str, Entry],
    keys: frozenset[str] | set[str],
    found_defaults: dict[str, Any],
    limits: dict[str, setting.Limit],
    where: str,
) -> list[str]:
    missing = sorted(set(keys) - set(entries))
    if missing:
        raise SystemExit(f"scripts/settings_reference.py: no entry for {where} {missing}")
    extra = sorted(set(entries) - set(keys))
    if extra:
        raise SystemExit(f"scripts/settings_reference.py: {where} has no key {extra}")
    lines = [
        "| key | type | default | bounds | checked by | meaning |",
        "|---|---|---|---|---|---|",
    ]
    for key in sorted(keys):
        kind, meaning, bounds, ids = entries[key]
        default = show(found_defaults[key]) if key in found_defaults else _NO_DEFAULT
        if key in limits:
            limit = limits[key]
            bounds = "`True` or `False`" if limit.kind == "bool" else limit.describe()
        checks = ", ".join(f"[`{i}`](checks.md)" for i in ids) or "-"
        lines.append(f"| `{key}` | {kind} | {default} | {bounds or '-'} | {checks} | {meaning} |")
    return lines


def render() -> str:
    """The page, as it is to be."""
    emitted = emitted_check_ids()
    sections: list[
        tuple[str, str, dict[str, Entry], frozenset[str] | set[str], dict[str, Any], dict[str, Any]]
    ] = [
        (
            "The `LEDGER` setting",
            "Its top level. Every key is optional; `LEDGER` left out takes every default. "
            "A key not listed here is `django_ledger.E002`, `LEDGER` not a dict "
            "`django_ledger.E001`.",
            TOP,
            setting.TOP_KEYS,
            setting.TOP_DEFAULTS,
            {},
        ),
        (
            "DEFAULTS",
            "`LEDGER['DEFAULTS']`: what every queue gets unless its own entry says otherwise.",
            {key: QUEUE[key] for key in setting.DEFAULTS},
            frozenset(setting.DEFAULTS),
            setting.DEFAULTS,
            setting.LIMITS,
        ),
        (
            "A queue's entry",
            "`LEDGER['QUEUES'][name]`: any key of `DEFAULTS` (its default is `DEFAULTS`'), "
            "and the keys below. The task options (`BACKOFF_BASE` to `UNIQUE`) apply to "
            "the tasks of the queue; a task's own declaration wins over them.",
            QUEUE,
            setting.QUEUE_KEYS,
            setting.DEFAULTS,
            setting.LIMITS,
        ),
        (
            "RATE",
            "`LEDGER['QUEUES'][name]['RATE']`, and a key's `RATE` in `KEY_LIMITS`.",
            RATE,
            setting.RATE_KEYS,
            {},
            {},
        ),
        (
            "DISPATCH",
            "`LEDGER['DISPATCH']`: the dispatch registry (`claim_dispatch`).",
            DISPATCH,
            setting.DISPATCH_KEYS,
            setting.DISPATCH_DEFAULTS,
            {"TTL": setting.LIMITS["TTL"]},
        ),
        (
            "TIMEOUTS",
            "`LEDGER['TIMEOUTS']`: seconds a Redis client the ledger builds (from a URL or "
            "cluster nodes) waits before it gives up.",
            TIMEOUTS,
            setting.TIMEOUT_KEYS,
            setting.TIMEOUT_DEFAULTS,
            {key: setting.TIMEOUT_LIMIT for key in setting.TIMEOUT_KEYS},
        ),
        (
            "DURABILITY",
            "`LEDGER['DURABILITY']`: after each write, `WAIT` for replicas.",
            DURABILITY,
            setting.DURABILITY_KEYS,
            setting.DURABILITY_DEFAULTS,
            setting.DURABILITY_LIMITS,
        ),
        (
            "SCHEDULES",
            "`LEDGER['SCHEDULES'][key]`: one schedule of the scheduler. `TASK` and one of "
            "`CRON`, `EVERY` or `AT` are required.",
            SCHEDULE,
            setting.SCHEDULE_KEYS,
            setting.SCHEDULE_DEFAULTS,
            {},
        ),
        (
            "API",
            "`LEDGER['API']`: the REST API's settings.",
            API,
            set(API_DEFAULTS),
            API_DEFAULTS,
            {},
        ),
        (
            "TASKS OPTIONS",
            "`TASKS[alias]['OPTIONS']` of a backend `django_ledger.tasks.LedgerBackend`.",
            OPTIONS,
            set(BACKEND_OPTION_DEFAULTS) | set(TRANSACTION_OPTION_DEFAULTS),
            {**BACKEND_OPTION_DEFAULTS, **TRANSACTION_OPTION_DEFAULTS},
            {},
        ),
    ]
    lines = [
        "# Settings",
        "",
        "<!-- Written by scripts/settings_reference.py from the code: edit the script, "
        "not this page. -->",
        "",
        "Every key of the `LEDGER` setting and of a `LedgerBackend`'s `TASKS` options: its",
        "type, default, bounds, and the system checks that report a wrong value",
        "(`manage.py check`; see [System checks](checks.md)). Durations are a `timedelta`",
        "or a number of seconds. How the settings fit together: [Django integration](django.md).",
    ]
    for title, intro, entries, keys, found_defaults, limits in sections:
        for _kind, _meaning, _bounds, ids in entries.values():
            for short in ids:
                if f"django_ledger.{short}" not in emitted:
                    raise SystemExit(
                        f"scripts/settings_reference.py: {title} names {short}, "
                        "which no check emits"
                    )
        lines += ["", f"## {title}", "", intro, ""]
        lines += _table(entries, keys, found_defaults, limits, title)
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the page is out of date")
    args = parser.parse_args()
    page = render()
    if args.check:
        if PAGE.read_text(encoding="utf-8") != page:
            print(f"{PAGE.relative_to(ROOT)} is out of date: run {__file__}", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(page, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
