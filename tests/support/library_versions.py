"""Function libraries in tests: which a server holds, and another version of the ledger's."""

from __future__ import annotations

import redis

from django_ledger.core.library import library

__all__ = ["libraries", "other_version"]


def libraries(server: redis.Redis) -> list[str]:
    """The names of the function libraries ``server`` holds."""
    names = []
    for entry in server.function_list():
        fields = dict(zip(entry[::2], entry[1::2], strict=True))
        name = fields[b"library_name"] if b"library_name" in fields else fields["library_name"]
        names.append(name.decode() if isinstance(name, bytes) else name)
    return names


def other_version() -> tuple[str, str]:
    """Another version of the library: its ``now`` answers 42 too, under another hash."""
    lua = library()
    other = "ledger_0123456789ab"
    source = lua.source.replace(lua.name, other).replace(
        "if #ARGV < 2 then return {now} end", "if #ARGV < 2 then return {now, 42} end"
    )
    assert source != lua.source.replace(lua.name, other)
    return other, source
