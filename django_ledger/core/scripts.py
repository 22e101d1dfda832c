"""The ledger's Lua scripts, loaded once from ``django_ledger/lua``.

Every script is a prelude (``codec.lua`` and the shared parts it calls) followed by its
own body, run through ``Ledger.run``: EVALSHA, and on NOSCRIPT one EVAL with the source
(which also caches it again), so a lost script cache (``SCRIPT FLUSH``, a restart, a
failover) never reaches a caller, even when it is flushed again between two calls.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

__all__ = ["SCRIPT_NAMES", "Scripts", "prelude", "source"]

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


#: The prelude before each script's body, in order. Lua builds every function of a
#: script's source each time the script runs, so a script carries the parts it calls
#: and few more: the admission, called once per task enqueued, only the codec and the
#: keyed pool's entries (tests/core/test_scripts.py checks that it defines nothing it does not
#: use, and that no script calls a prelude function its parts leave out).
_CODEC = ("codec.lua", "store.lua")
#: Scripts that end records or run workflows: ``flow.lua`` follows the codec prelude.
_FLOWS = (*_CODEC, "flow.lua")
#: The queue's limits, read and held in the claim, per key with a KEY (keyed.lua).
_LIMITS = ("limits_read.lua", "limits.lua", "keyed_pool.lua", "keyed.lua")
_PRELUDE: dict[str, tuple[str, ...]] = {
    "admit": ("codec.lua", "keyed_pool.lua"),
    "claim": (*_CODEC, "ops.lua", *_LIMITS),
    "settle": (*_FLOWS, "settling.lua", "limits_read.lua"),
    **dict.fromkeys(("settle_claim", "limit"), (*_FLOWS, "ops.lua", "settling.lua", *_LIMITS)),
    **dict.fromkeys(("repair", "flow_admit", "flow_release", "flow_cancel", "flow_reopen"), _FLOWS),
}


def prelude(name: str) -> tuple[str, ...]:
    """Return the prelude files of script ``name``, in the order they are prepended."""
    return _PRELUDE.get(name, _CODEC)


@cache
def source(name: str) -> str:
    """Return the full source of script ``name``: its prelude, then its body."""
    folder = resources.files("django_ledger.core") / "lua"
    parts = (*prelude(name), f"{name}.lua")
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
