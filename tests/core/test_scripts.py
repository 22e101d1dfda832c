"""The Lua library (``core/scripts.py``): each script loads, its prelude fits its body,
its keys go by name, and an error inside it names its ``.lua`` file and line.

A script's source is its prelude files and then its body. A prelude function a script
calls but its parts leave out is a global name to Lua, an error only on the path that
calls it; one it carries but never calls is built on every call for nothing (Lua makes
each function of the source anew each time a script runs). Read from the sources with
a small scanner: comments and strings out, then names.
"""

from __future__ import annotations

import hashlib
import re
from importlib import resources

import pytest
import redis
from redis.cluster import RedisCluster

from django_ledger.core.scripts import SCRIPT_NAMES, key_line, prelude, source
from tests.support.ledger_helpers import servers

LUA = resources.files("django_ledger.core") / "lua"
#: Files that are some script's prelude: every file of lib/, and no other.
PRELUDE_FILES = frozenset(part for name in SCRIPT_NAMES for part in prelude(name))
BODIES = sorted(
    entry.name.removesuffix(".lua")
    for entry in (LUA / "scripts").iterdir()
    if entry.name.endswith(".lua")
)
#: Scripts whose prelude holds nothing they do not call: the admission runs once per
#: task enqueued, so what its source builds is paid on every enqueue.
LEAN = ("admit",)

_NOISE = re.compile(r"""'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"|--[^\n]*""")
#: A name, not a field (``r.due``) or a method (``s:sub``).
_NAME = re.compile(r"(?<![.:\w])[A-Za-z_]\w*")
#: What a prelude file defines at its top level: locals, and a forward-declared local's
#: later assignment (limits_accounting.lua's ``keyed_claim``).
_DEFINITION = re.compile(r"^(?:local function (\w+)|local (\w+)\b|(\w+) = function\b)", re.M)


def code(text: str) -> str:
    """Return Lua source without comments, with each string literal as ``''``."""
    return _NOISE.sub(lambda m: "" if m.group().startswith("--") else "''", text)


def definitions(text: str) -> list[tuple[str, int, str]]:
    """Return (name, offset, text up to the next definition) per top-level definition."""
    found = [(next(g for g in m.groups() if g), m.start()) for m in _DEFINITION.finditer(text)]
    if not found:
        return []
    ends = [offset for _, offset in found[1:]] + [len(text)]
    return [(name, start, text[start:end]) for (name, start), end in zip(found, ends, strict=True)]


def split(name: str) -> tuple[str, str]:
    """Return script ``name``'s prelude and body, as ``code`` leaves them."""
    parts = [(LUA / p).read_text(encoding="utf-8") for p in (*prelude(name), f"scripts/{name}.lua")]
    # The keys' naming line (``K``'s fields) defines no function: not scanned.
    return code("\n".join(parts[:-1])), code(parts[-1])


def test_sources_are_their_parts_in_order() -> None:
    assert list(SCRIPT_NAMES) == BODIES
    lib = {f"lib/{e.name}" for e in (LUA / "lib").iterdir() if e.name.endswith(".lua")}
    assert lib == PRELUDE_FILES  # every part of lib/ is used, and only those are parts
    assert not [e.name for e in LUA.iterdir() if e.name.endswith(".lua")]  # none loose
    for name in BODIES:
        parts = (*prelude(name), f"scripts/{name}.lua")
        texts = [key_line(name), *((LUA / p).read_text(encoding="utf-8") for p in parts)]
        assert source(name) == "\n".join(texts)
        assert prelude(name)[:1] in (("lib/codec.lua",), ())


@pytest.mark.parametrize("name", BODIES)
def test_every_script_loads(redis_client: redis.Redis | RedisCluster, name: str) -> None:
    sha = hashlib.sha1(source(name).encode("utf-8")).hexdigest()
    for server in servers(redis_client):
        assert server.script_load(source(name)) == sha
        assert server.script_exists(sha) == [True]


@pytest.mark.parametrize("name", BODIES)
def test_every_prelude_name_a_script_uses_is_defined_before(name: str) -> None:
    head, body = split(name)
    text = head + "\n" + body
    defined: dict[str, int] = {}
    for d, offset, _ in definitions(head):
        defined.setdefault(d, offset)
    every = {d for part in PRELUDE_FILES for d, _, _ in definitions(code((LUA / part).read_text()))}
    missing = set()
    for match in _NAME.finditer(text):
        word = match.group()
        if word in every and (word not in defined or defined[word] > match.start()):
            missing.add(word)
    assert not missing, f"{name}.lua's prelude {prelude(name)} lacks {sorted(missing)}"


@pytest.mark.parametrize("name", LEAN)
def test_lean_scripts_carry_no_unused_prelude(name: str) -> None:
    head, body = split(name)
    blocks = {d: block for d, _, block in definitions(head)}
    used, todo = set(), [body]
    while todo:
        for word in _NAME.findall(todo.pop()):
            if word in blocks and word not in used:
                used.add(word)
                todo.append(blocks[word])
    unused = sorted(set(blocks) - used)
    assert not unused, f"{name}'s prelude {prelude(name)} carries {unused}, never called"
