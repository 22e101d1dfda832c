"""The ledger's Lua, built from ``lua/`` as ONE Redis function library.

``lua/lib/`` holds the shared parts (the record codec, claiming, settling, limits,
workflows), ``lua/scripts/`` one entry script per call. The library is::

    #!lua name=ledger_<hash>
    local KEYS, ARGV                      -- set by each function as it starts
    <every file of lib/, once, in LIB_PARTS order>
    redis.register_function{function_name = 'ledger_<hash>_admit', callback = function(keys, args)
    KEYS, ARGV = keys, args               -- the parts read KEYS and ARGV as a script's
    KEYS.records, ... = KEYS[1], ...      -- the keys by name (KEY_NAMES)
    <scripts/admit.lua>
    end}
    ...                                   -- one function per entry script

``<hash>`` is the first 12 hex digits of the SHA-1 of that text (with the name left
out), so each version of the code has its own library and functions: two versions side
by side (a rolling deploy) each call their own. Lua builds the parts' functions once,
when the library is loaded, not on every call as it does for a script's source.
Read-only entry scripts (``READ_ONLY``) are flagged ``no-writes``: they run on a
replica and under ``maxmemory``; writers carry no flags, so a server out of memory
refuses them before they run (nothing half-written).

An error Redis raises inside a function names a line of the whole library
(``user_function:812``) and the function; ``located`` turns it into the ``.lua`` file
and line it came from and the script's name.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

import redis as redis_py

from .layout import QUEUE_KEY_NAMES

__all__ = [
    "KEY_NAMES",
    "LIB_PARTS",
    "READ_ONLY",
    "SCRIPT_NAMES",
    "Library",
    "LuaScript",
    "key_line",
    "library",
    "located",
    "script",
]

_FOLDER = resources.files("django_ledger.core") / "lua"

#: The entry scripts, one per file of ``lua/scripts/``.
SCRIPT_NAMES: tuple[str, ...] = tuple(
    sorted(
        entry.name.removesuffix(".lua")
        for entry in (_FOLDER / "scripts").iterdir()
        if entry.name.endswith(".lua")
    )
)

#: The entry scripts that never write: registered ``no-writes`` (and never followed by
#: ``WAIT`` with durability on).
READ_ONLY = frozenset(
    {"stats", "now", "admin_page", "admin_quarantine", "server_time", "schedule_snapshot"}
)

#: The names of each script's keys, in ``KEYS`` order (``KEYS.<name>`` in Lua). A script
#: not named here takes a queue's keys (``layout.QueueKeys``).
KEY_NAMES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(SCRIPT_NAMES, QUEUE_KEY_NAMES),
    # A queue's counters (core/counters.py), then the indexes a depth sample reads.
    "counters": (
        "minute",
        "hour",
        "old_minute",
        "old_hour",
        "errors",
        "minute_index",
        "hour_index",
        "ready",
        "leases",
        "dead",
    ),
    # A bulk run's page (core/bulk.py): the queue's keys, then the run's hash on the shard.
    "bulk": (*QUEUE_KEY_NAMES, "run"),
    "schedule_commit": ("state", "defs"),
    "schedule_define": ("state", "defs"),
    "schedule_snapshot": ("state", "defs"),
    "schedule_publish": ("node", "nodes"),
    "server_time": ("node",),
}

#: The library's parts, in load order: each file calls only what the files before it
#: (and itself, above) define.
LIB_PARTS: tuple[str, ...] = (
    "lib/codec.lua",
    "lib/indexes.lua",
    "lib/workflows.lua",
    "lib/settling.lua",
    "lib/limits_read.lua",
    "lib/limits_accounting.lua",
    "lib/claiming.lua",
    "lib/keyed_pool.lua",
    "lib/keyed_claim.lua",
)

#: Stands for the library's name while its text is hashed.
_MARK = "@LIBRARY@"


def key_line(name: str) -> str:
    """Return the Lua line naming script ``name``'s keys: ``KEYS.records, ... = KEYS[1], ...``.

    The names are fields of ``KEYS`` itself (a fresh table each call), read by the
    library's parts as by the script's body.
    """
    names = KEY_NAMES[name]
    fields = ", ".join(f"KEYS.{key}" for key in names)
    return f"{fields} = " + ", ".join(f"KEYS[{i}]" for i in range(1, len(names) + 1))


@dataclass(frozen=True)
class Part:
    """One file of the library and the lines of the library it fills."""

    path: str
    first: int
    last: int


@dataclass(frozen=True, eq=False)
class LuaScript:
    """One entry script: the function that runs it and whether it may write."""

    name: str
    function: str
    writes: bool


@dataclass(frozen=True, eq=False)
class Library:
    """The whole library: its name, its source, the files it was built from."""

    name: str
    source: str
    parts: tuple[Part, ...]

    def function(self, name: str) -> str:
        """The registered name of entry script ``name``'s function."""
        return f"{self.name}_{name}"

    def locate(self, line: int) -> tuple[str, int]:
        """Return the file (under ``lua/``) and the line of that file at library ``line``."""
        for part in self.parts:
            if part.first <= line <= part.last:
                return part.path, line - part.first + 1
        return "(the library's own lines: core/library.py)", line


def _read(path: str) -> str:
    return (_FOLDER / path).read_text(encoding="utf-8")


def _function(name: str) -> list[tuple[str, str]]:
    """The texts of entry script ``name``'s registration, each with the file it is from."""
    flags = " flags = {'no-writes'}," if name in READ_ONLY else ""
    head = (
        f"redis.register_function{{function_name = '{_MARK}_{name}',{flags}"
        " callback = function(keys, args)\nKEYS, ARGV = keys, args"
    )
    here = "(the function's head: core/library.py)"
    return [
        (here, head),
        ("(the keys' names: core/library.py)", key_line(name)),
        (f"scripts/{name}.lua", _read(f"scripts/{name}.lua")),
        ("(the function's end: core/library.py)", "end}"),
    ]


@cache
def library() -> Library:
    """Return the library built from ``lua/``, named by the hash of its text."""
    texts = [("(the library's head: core/library.py)", f"#!lua name={_MARK}\nlocal KEYS, ARGV")]
    texts += [(path, _read(path)) for path in LIB_PARTS]
    for name in SCRIPT_NAMES:
        texts += _function(name)
    parts, line = [], 1
    for path, text in texts:
        lines = text.count("\n") + 1  # joined by "\n": a final newline adds an empty line
        parts.append(Part(path, line, line + lines - 1))
        line += lines
    template = "\n".join(text for _, text in texts)
    name = "ledger_" + hashlib.sha1(template.encode("utf-8")).hexdigest()[:12]
    return Library(name, template.replace(_MARK, name), tuple(parts))


@cache
def script(name: str) -> LuaScript:
    """Return entry script ``name`` (``SCRIPT_NAMES``)."""
    if name not in SCRIPT_NAMES:
        raise ValueError(f"no Lua script {name!r}: the scripts are {', '.join(SCRIPT_NAMES)}")
    return LuaScript(name, library().function(name), name not in READ_ONLY)


_LINE = re.compile(r"user_function: ?(\d+)")
_FUNCTION = re.compile(r"script: (ledger_[0-9a-f]{12})_(\w+)")


def located(exc: redis_py.ResponseError) -> redis_py.ResponseError:
    """Return a function's error whose message names the ``.lua`` file and line, else ``exc``.

    Redis names a line of the whole library (``user_function:812``) and the function
    (``script: ledger_<hash>_claim``); the new message names
    ``django_ledger/core/lua/lib/claiming.lua:15`` and ``script claim``. An error of
    another version's library (another hash) is left as it is.
    """
    message = str(exc)
    found = _FUNCTION.search(message)
    lua = library()
    if found is None or found.group(1) != lua.name or not _LINE.search(message):
        return exc

    def where(match: re.Match[str]) -> str:
        path, line = lua.locate(int(match.group(1)))
        return f"django_ledger/core/lua/{path}:{line}"

    text = _LINE.sub(where, message).replace(found.group(0), f"script {found.group(2)}")
    new = type(exc)(text)
    new.__cause__ = exc
    return new
