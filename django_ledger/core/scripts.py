"""The ledger's Lua scripts, loaded once from ``django_ledger/lua``.

Every script is the shared prelude (``codec.lua``) followed by its own body, run
through ``Ledger.run``: EVALSHA, and on NOSCRIPT one EVAL with the source (which also
caches it again), so a lost script cache (``SCRIPT FLUSH``, a restart, a failover)
never reaches a caller, even when it is flushed again between two calls.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

__all__ = ["SCRIPT_NAMES", "Scripts", "source"]

SCRIPT_NAMES = (
    "admit",
    "claim",
    "settle",
    "settle_claim",
    "fence",
    "repair",
    "import_records",
    "stats",
    "sweep",
    "write",
    "reindex",
    "quarantine",
    "now",
    "counters",
    "limit",
    "flow_admit",
    "flow_release",
    "flow_cancel",
    "flow_reopen",
)


#: Scripts that claim or settle: the shared ``flow.lua`` (workflows), ``ops.lua`` and
#: ``limits.lua`` follow the codec prelude (``limit``, the limits' own script, too).
_OPS = frozenset({"claim", "settle", "settle_claim"})
#: Scripts that end records or run workflows: ``flow.lua`` follows the codec prelude.
_FLOWS = frozenset({"repair", "flow_admit", "flow_release", "flow_cancel", "flow_reopen"})


@cache
def source(name: str) -> str:
    """Return the full source of script ``name``: the codec prelude, then its body."""
    folder = resources.files("django_ledger.core") / "lua"
    if name in _OPS:
        parts = ["codec.lua", "flow.lua", "ops.lua", "limits.lua", f"{name}.lua"]
    elif name == "limit":
        parts = ["codec.lua", "flow.lua", "ops.lua", "limits.lua", "limit.lua"]
    elif name in _FLOWS:
        parts = ["codec.lua", "flow.lua", f"{name}.lua"]
    else:
        parts = ["codec.lua", f"{name}.lua"]
    return "\n".join((folder / part).read_text(encoding="utf-8") for part in parts)


class Scripts:
    """The scripts registered on one redis-py client (``Redis`` or ``RedisCluster``)."""

    def __init__(self, redis: Any) -> None:
        for name in SCRIPT_NAMES:
            setattr(self, name, redis.register_script(source(name)))

    admit: Any
    claim: Any
    settle: Any
    settle_claim: Any
    fence: Any
    repair: Any
    import_records: Any
    stats: Any
    sweep: Any
    write: Any
    reindex: Any
    quarantine: Any
    now: Any
    counters: Any
    limit: Any
    flow_admit: Any
    flow_release: Any
    flow_cancel: Any
    flow_reopen: Any
