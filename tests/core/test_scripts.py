"""The Lua library (``core/library.py``): it loads as one function library, its parts
come in an order in which each name is defined before it is used, its read-only
functions are flagged ``no-writes``, and its name follows its text.

A part's function that calls a name no earlier part (nor itself, above) defines calls a
global to Lua: an error only on the path that calls it. Read from the sources with a
small scanner: comments and strings out, then names.
"""

from __future__ import annotations

import hashlib
import re
from importlib import resources

import pytest
import redis
from redis.cluster import RedisCluster

from django_ledger.core.library import (
    LIB_PARTS,
    READ_ONLY,
    SCRIPT_NAMES,
    key_line,
    library,
    script,
)
from django_ledger.core.runner import WRITE_SCRIPTS
from tests.support.ledger_helpers import servers

LUA = resources.files("django_ledger.core") / "lua"
BODIES = sorted(
    entry.name.removesuffix(".lua")
    for entry in (LUA / "scripts").iterdir()
    if entry.name.endswith(".lua")
)
#: Redis commands that write (the ones the ledger's Lua calls, and their kin).
WRITES = re.compile(
    r"redis\.p?call\('(SET|HSET|HSETNX|HDEL|HINCRBY|DEL|UNLINK|ZADD|ZREM|ZPOPMIN|ZINCRBY|"
    r"INCR|INCRBY|DECR|EXPIRE|PEXPIRE|PEXPIREAT|GETDEL|SETNX|RENAME|LPUSH|RPUSH)'"
)

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


def parts() -> str:
    """The library's parts in load order, as ``code`` leaves them."""
    return code("\n".join((LUA / p).read_text(encoding="utf-8") for p in LIB_PARTS))


def test_the_library_is_its_parts_each_once_in_order_then_its_functions() -> None:
    assert list(SCRIPT_NAMES) == BODIES
    lib = {f"lib/{e.name}" for e in (LUA / "lib").iterdir() if e.name.endswith(".lua")}
    assert set(LIB_PARTS) == lib and len(LIB_PARTS) == len(lib)  # each part once
    assert not [e.name for e in LUA.iterdir() if e.name.endswith(".lua")]  # none loose
    lua = library()
    assert re.fullmatch(r"ledger_[0-9a-f]{12}", lua.name)
    assert lua.source.startswith(f"#!lua name={lua.name}\n")
    offset = 0
    for path in LIB_PARTS:  # in order, each once
        text = (LUA / path).read_text(encoding="utf-8")
        assert lua.source.count(text) == 1, path
        assert lua.source.index(text) > offset
        offset = lua.source.index(text)


@pytest.mark.parametrize("name", BODIES)
def test_each_script_is_one_function_its_keys_named_then_its_body(name: str) -> None:
    lua = library()
    body = (LUA / "scripts" / f"{name}.lua").read_text(encoding="utf-8")
    head = f"function_name = '{lua.name}_{name}',"
    assert lua.source.count(head) == 1
    after = lua.source[lua.source.index(head) :]
    flags = " flags = {'no-writes'}," if name in READ_ONLY else ""
    assert after.startswith(f"{head}{flags} callback = function(keys, args)\n")
    lines = after.split("\n")
    assert lines[1:3] == ["KEYS, ARGV = keys, args", key_line(name)]
    assert after.startswith(f"{lines[0]}\n{lines[1]}\n{key_line(name)}\n{body}\nend}}")
    assert script(name).function == f"{lua.name}_{name}"


def test_the_name_is_the_hash_of_the_text() -> None:
    lua = library()
    text = lua.source.replace(lua.name, "@LIBRARY@")
    assert lua.name == "ledger_" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def test_the_library_loads_with_no_writes_on_the_read_only_scripts(
    redis_client: redis.Redis | RedisCluster,
) -> None:
    lua = library()
    for server in servers(redis_client):
        assert server.function_load(lua.source, replace=True) in (lua.name, lua.name.encode())
        (listed,) = server.function_list(library=lua.name)
        entry = dict(zip(listed[::2], listed[1::2], strict=True))
        flags = {}
        for function in entry[b"functions"]:
            fields = dict(zip(function[::2], function[1::2], strict=True))
            flags[fields[b"name"].decode()] = [f.decode() for f in fields[b"flags"]]
        assert flags == {
            f"{lua.name}_{name}": (["no-writes"] if name in READ_ONLY else []) for name in BODIES
        }


def test_the_read_only_scripts_write_nothing() -> None:
    assert set(SCRIPT_NAMES) - WRITE_SCRIPTS == READ_ONLY
    for name in READ_ONLY:
        body = (LUA / "scripts" / f"{name}.lua").read_text(encoding="utf-8")
        assert not WRITES.search(code(body)), name
    # The parts they call are checked by Redis: a write inside a no-writes function
    # fails, and the suite runs every read-only script.


def test_every_name_a_part_uses_is_defined_before() -> None:
    text = parts()
    defined: dict[str, int] = {}
    for d, offset, _ in definitions(text):
        defined.setdefault(d, offset)
    late = set()
    for match in _NAME.finditer(text):
        word = match.group()
        if word in defined and defined[word] > match.start():
            late.add(word)
    assert not late, f"used before LIB_PARTS defines them: {sorted(late)}"


def test_every_definition_of_the_parts_is_used() -> None:
    blocks = {d: block for d, _, block in definitions(parts())}
    bodies = [code((LUA / "scripts" / f"{n}.lua").read_text(encoding="utf-8")) for n in BODIES]
    used, todo = set(), bodies
    while todo:
        for word in _NAME.findall(todo.pop()):
            if word in blocks and word not in used:
                used.add(word)
                todo.append(blocks[word])
    assert not sorted(set(blocks) - used)
