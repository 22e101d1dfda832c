"""The Lua library's rules: keys by name in both languages, one way to load the library,
and a function's error named by its ``.lua`` file and line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import redis
from redis.cluster import RedisCluster

from django_ledger import Ledger
from django_ledger.core.errors import LedgerError
from django_ledger.core.layout import QUEUE_KEY_NAMES, QueueKeys
from django_ledger.core.library import Library, library
from django_ledger.core.scripts import KEY_NAMES, SCRIPT_NAMES, call, key_line, script
from tests.support.ledger_helpers import servers

PACKAGE = Path(__file__).resolve().parents[2] / "django_ledger"
LUA = PACKAGE / "core" / "lua"


def test_no_lua_file_reads_a_key_by_its_position() -> None:
    found = [
        f"{path.relative_to(LUA)}:{number}: {line.strip()}"
        for path in sorted(LUA.rglob("*.lua"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"KEYS\[\s*\d+\s*\]", line)
    ]
    assert not found, "\n".join(found)


def test_no_python_module_reads_a_key_by_its_position() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\bkeys\[\s*-?\d+\s*\]", line)
    ]
    assert not found, "\n".join(found)


def test_the_naming_line_is_the_only_positional_access_and_matches_python() -> None:
    line = key_line("claim")
    assert line.count("\n") == 0
    fields, _, values = line.partition(" = ")
    named = list(
        zip(re.findall(r"KEYS\.(\w+)", fields), re.findall(r"KEYS\[(\d+)\]", values), strict=True)
    )
    assert [name for name, _ in named] == list(QUEUE_KEY_NAMES)
    assert [int(i) for _, i in named] == list(range(1, len(QUEUE_KEY_NAMES) + 1))
    keys = QueueKeys.of("ns", "q")
    assert keys.held == "{ns:q}:held" and keys.keyed == "{ns:q}:keyed"
    assert len(set(keys)) == len(keys)  # one meaning, one key
    source = library().source
    assert all(f"KEYS, ARGV = keys, args\n{key_line(name)}\n" in source for name in SCRIPT_NAMES)


def test_each_queue_key_is_described_in_the_encoding_page() -> None:
    page = (PACKAGE.parent / "docs" / "encoding.md").read_text(encoding="utf-8")
    missing = [name for name in QUEUE_KEY_NAMES if f"`{{N:Q}}:{name}`" not in page]
    assert not missing, f"docs/encoding.md does not describe {missing}"


def test_every_script_names_the_keys_it_is_given() -> None:
    assert set(KEY_NAMES) == set(SCRIPT_NAMES)
    for name in SCRIPT_NAMES:
        body = (LUA / "scripts" / f"{name}.lua").read_text(encoding="utf-8")
        used = set(re.findall(r"\bKEYS\.(\w+)", body))
        assert used <= set(KEY_NAMES[name]), (name, used - set(KEY_NAMES[name]))


def test_the_package_loads_lua_only_through_the_registry() -> None:
    # Runner.run sends the registry's functions itself (a connection scope, durability);
    # nothing else registers, loads or sends Lua of its own.
    loaders = re.compile(
        r"register_script|script_load|function_load|FUNCTION LOAD|evalsha|EVALSHA|"
        r"\.eval\(\s*[\"']|lua\"\)"
    )
    found = [
        f"{path.relative_to(PACKAGE)}:{number}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name not in ("scripts.py", "library.py")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if loaders.search(line)
    ]
    assert not found, found


def _line_of(lua: Library, path: str, text: str) -> int:
    """The line of the library where ``text`` is in file ``path`` (and that file's line)."""
    part = next(p for p in lua.parts if p.path == path)
    lines = lua.source.split("\n")
    for number in range(part.first, part.last + 1):
        if text in lines[number - 1]:
            return number
    raise AssertionError(f"{text!r} is not in {path}")


def test_a_line_of_the_library_maps_to_its_file() -> None:
    lua = library()
    for path, text in (
        ("lib/claiming.lua", "local function claim_due("),
        ("scripts/settle_claim.lua", "local now = server_now()"),
    ):
        found, line = lua.locate(_line_of(lua, path, text))
        assert found == path
        assert (LUA / path).read_text(encoding="utf-8").splitlines()[line - 1].startswith(text)


def test_a_script_error_names_its_lua_file_and_line(
    redis_client: redis.Redis | RedisCluster, namespace: str
) -> None:
    """A record whose bytes break the claim's write reaches Redis's error inside the script."""
    ledger = Ledger(redis_client, namespace, "q")
    ledger.admit("a", "work")
    # A ready index that is a string: the claim's ZRANGEBYSCORE fails inside the script.
    redis_client.delete(ledger.ready_key)
    redis_client.set(ledger.ready_key, "not a sorted set")
    with pytest.raises(LedgerError) as caught:
        ledger.claim("w")
    message = str(caught.value)
    found = re.search(r"django_ledger/core/lua/([\w/]+\.lua):(\d+)", message)
    assert found, message
    path, line = found.group(1), int(found.group(2))
    text = (LUA / path).read_text(encoding="utf-8").splitlines()[line - 1]
    assert "redis.call(" in text and "KEYS.ready" in text, (message, text)
    assert "script claim" in message
    redis_client.delete(ledger.ready_key)


def test_flushed_functions_never_reach_a_caller_of_the_registry(
    redis_client: redis.Redis | RedisCluster, namespace: str
) -> None:
    key = f"{{{namespace}}}:clock"
    seconds, _ = call(redis_client, script("server_time"), [key], [])
    for server in servers(redis_client):
        server.function_flush()
    again, micros = call(redis_client, script("server_time"), [key], [])
    assert int(again) >= int(seconds) and 0 <= int(micros) < 1_000_000


def test_no_script_builds_a_key_name() -> None:
    """Every key a script touches arrives in KEYS: none is joined from parts (``..``)."""
    built = re.compile(r"redis\.call\('[A-Z]+',\s*[^,)']*\.\.")
    found = [
        f"{path.relative_to(LUA)}:{number}: {line.strip()}"
        for path in sorted(LUA.rglob("*.lua"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if built.search(line)
    ]
    assert not found, "\n".join(found)
