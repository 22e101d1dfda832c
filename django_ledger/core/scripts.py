"""The ledger's Lua library: every script, built from ``lua/`` and loaded through here.

``lua/lib/`` holds the shared parts (the record codec, claiming, settling, limits,
workflows), ``lua/scripts/`` one entry script per call. A script's source is one line
naming its keys (``KEYS.records, KEYS.ready, ... = KEYS[1], KEYS[2], ...``, built from
``KEY_NAMES``), the
parts its body calls (``prelude``), then its body. Lua builds every function of a
source each time the script runs, so a script carries the parts it calls and few more.

Scripts run by EVALSHA, and on NOSCRIPT one EVAL with the source (which also caches it
again), so a lost script cache (``SCRIPT FLUSH``, a restart, a failover) never reaches
a caller. An error Redis raises inside a script names a line of the whole source;
``located`` turns it into the ``.lua`` file and line it came from.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import redis as redis_py

from .layout import QUEUE_KEY_NAMES

__all__ = [
    "KEY_NAMES",
    "SCRIPT_NAMES",
    "LuaScript",
    "Scripts",
    "call",
    "key_line",
    "located",
    "prelude",
    "script",
    "source",
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

_CODEC = ("lib/codec.lua", "lib/indexes.lua")
#: Scripts that end records or run workflows.
_FLOWS = (*_CODEC, "lib/workflows.lua")
#: The claim under the queue's limits: rate and concurrency, then per key (a KEY).
_CLAIM = (
    "lib/limits_read.lua",
    "lib/limits_accounting.lua",
    "lib/claiming.lua",
    "lib/keyed_pool.lua",
    "lib/keyed_claim.lua",
)
_PRELUDE: dict[str, tuple[str, ...]] = {
    # The admission runs once per task enqueued: only the codec and the pool's entries.
    "admit": ("lib/codec.lua", "lib/keyed_pool.lua"),
    "claim": (*_CODEC, *_CLAIM),
    "settle": (*_FLOWS, "lib/settling.lua", "lib/limits_read.lua"),
    "cancel": (*_FLOWS, "lib/limits_read.lua"),
    **dict.fromkeys(("settle_claim", "limits_control"), (*_FLOWS, "lib/settling.lua", *_CLAIM)),
    **dict.fromkeys(
        ("repair", "flow_admit", "flow_release", "flow_cancel", "flow_reopen", "bulk"), _FLOWS
    ),
    **dict.fromkeys(
        (
            "schedule_commit",
            "schedule_define",
            "schedule_snapshot",
            "schedule_publish",
            "server_time",
        ),
        (),
    ),
}


def prelude(name: str) -> tuple[str, ...]:
    """Return the library parts of script ``name`` (paths under ``lua/``), in order."""
    return _PRELUDE.get(name, _CODEC)


def key_line(name: str) -> str:
    """Return the Lua line naming script ``name``'s keys: ``KEYS.records, ... = KEYS[1], ...``.

    The names are fields of ``KEYS`` itself (a fresh table each call), not of a local
    table: a local is an upvalue of every function that reads it, and capturing one
    upvalue in each of a prelude's functions cost about 3 µs a call (measured).
    """
    names = KEY_NAMES[name]
    fields = ", ".join(f"KEYS.{key}" for key in names)
    return f"{fields} = " + ", ".join(f"KEYS[{i}]" for i in range(1, len(names) + 1))


@dataclass(frozen=True)
class Part:
    """One file of a script's source and the source lines it fills."""

    path: str
    first: int
    last: int


@dataclass(frozen=True, eq=False)
class LuaScript:
    """One entry script: its full source, its SHA-1, and the files it was built from."""

    name: str
    script: str
    sha: str
    parts: tuple[Part, ...]

    def locate(self, line: int) -> tuple[str, int]:
        """Return the file (under ``lua/``) and the line of that file at source ``line``."""
        for part in self.parts:
            if part.first <= line <= part.last:
                return part.path, line - part.first + 1
        return f"scripts/{self.name}.lua", line


@cache
def script(name: str) -> LuaScript:
    """Return entry script ``name`` built from its files (``SCRIPT_NAMES``)."""
    if name not in SCRIPT_NAMES:
        raise ValueError(f"no Lua script {name!r}: the scripts are {', '.join(SCRIPT_NAMES)}")
    texts = [("(the keys' names: core/scripts.py)", key_line(name))]
    texts += [(path, (_FOLDER / path).read_text(encoding="utf-8")) for path in prelude(name)]
    texts.append((f"scripts/{name}.lua", (_FOLDER / "scripts" / f"{name}.lua").read_text("utf-8")))
    parts, line = [], 1
    for path, text in texts:
        lines = text.count("\n") + 1  # joined by "\n": a final newline adds an empty line
        parts.append(Part(path, line, line + lines - 1))
        line += lines
    full = "\n".join(text for _, text in texts)
    sha = hashlib.sha1(full.encode("utf-8")).hexdigest()
    return LuaScript(name, full, sha, tuple(parts))


def source(name: str) -> str:
    """Return the full source of script ``name``: its keys' names, its prelude, its body."""
    return script(name).script


class Scripts:
    """Every entry script by name: ``SCRIPTS.claim``, ``SCRIPTS.settle_claim``, ..."""

    def __getattr__(self, name: str) -> LuaScript:
        try:
            return script(name)
        except ValueError as exc:
            raise AttributeError(str(exc)) from None


#: The one registry every caller runs its scripts from.
SCRIPTS = Scripts()

_LINE = re.compile(r"user_script:(\d+)")
_SHA = re.compile(r"script: ([0-9a-f]{40})")


def _by_sha() -> dict[str, LuaScript]:
    return {s.sha: s for s in map(script, SCRIPT_NAMES)}


def located(exc: redis_py.ResponseError) -> redis_py.ResponseError:
    """Return a script error whose message names the ``.lua`` file and line, else ``exc``.

    Redis names a line of the whole source (``user_script:812``) and the script's SHA-1;
    the new message names ``django_ledger/core/lua/lib/claiming.lua:15`` and the script.
    """
    message = str(exc)
    found = _SHA.search(message)
    lua = _by_sha().get(found.group(1)) if found else None
    if lua is None or not _LINE.search(message):
        return exc

    def where(match: re.Match[str]) -> str:
        path, line = lua.locate(int(match.group(1)))
        return f"django_ledger/core/lua/{path}:{line}"

    text = _LINE.sub(where, message).replace(f"script: {lua.sha}", f"script {lua.name}")
    new = type(exc)(text)
    new.__cause__ = exc
    return new


def call(redis: Any, lua: LuaScript, keys: Sequence[str], args: Sequence[Any]) -> Any:
    """Run ``lua`` on ``keys``: EVALSHA, and on NOSCRIPT one EVAL with its source.

    A script error comes back as ``located`` names it. The ledger's own queue calls go
    through ``Runner.run``, which adds a queue's connection scope and durability.
    """
    try:
        try:
            return redis.evalsha(lua.sha, len(keys), *keys, *args)
        except redis_py.exceptions.NoScriptError:
            return redis.eval(lua.script, len(keys), *keys, *args)
    except redis_py.ResponseError as exc:
        raise located(exc) from exc
