"""A record's state transitions, written once: which state may go to which, by which operation.

Every writer of a record keeps to this table: the Lua scripts (``lua/``) and the
reference path's Python (``reference*.py``); ``tests/core/test_codec_transitions.py`` reads
both sources and checks the states each writes against it, and drives both paths to
check each change a call makes. ``None`` as a source is no record: a new id, or a
workflow step that waits (it has no record until released).
"""

from __future__ import annotations

from dataclasses import dataclass

from .records import State

__all__ = ["TRANSITIONS", "Transition", "allowed"]

P, C, K, F, D = State.PENDING, State.CLAIMED, State.COMPLETED, State.FAILED, State.DEAD


@dataclass(frozen=True)
class Transition:
    """``operation`` may take a record from ``source`` to ``target``.

    ``lua``: the Lua sources (file names without ``.lua``) that write ``target`` as a
    literal state; ``reference``: the reference path's functions that write it. A writer
    that stores bytes built elsewhere (``write.lua``, ``import_records.lua``,
    ``flow_reopen.lua``) names no state of its own and is listed under neither.
    """

    operation: str
    source: State | None
    target: State
    lua: frozenset[str] = frozenset()
    reference: frozenset[str] = frozenset()


def _t(
    operation: str,
    sources: tuple[State | None, ...],
    target: State,
    lua: tuple[str, ...] = (),
    reference: tuple[str, ...] = (),
) -> list[Transition]:
    return [
        Transition(operation, source, target, frozenset(lua), frozenset(reference))
        for source in sources
    ]


TRANSITIONS: tuple[Transition, ...] = tuple(
    # The reference ledger's contract.
    _t("admit", (None,), P, ("admit",), ("admit",))
    + _t("claim", (P,), C, ("claiming",), ("_claim_one",))
    + _t("renew", (C,), C)  # the lease moves on; the state is not written
    + _t("settle", (C,), K, ("settling",), ("_settle",))
    + _t("settle", (C,), F, ("settling",), ("_settle",))
    + _t("settle", (C,), P, ("settling",), ("_settle",))  # a retry, due after its delay
    + _t("release", (C,), P, ("settling",), ("_settle",))  # unstarted: the attempt back
    + _t("repair", (C,), P, ("repair",), ("repair",))  # its lease expired
    + _t("repair", (C,), D, ("repair",), ("repair",))  # ... after max_attempts claims
    + _t("import", (None,), P)
    + _t("import", (None,), C)
    + _t("import", (None,), K)
    + _t("import", (None,), F)
    + _t("import", (None,), D)
    # Workflows (the fused path only).
    + _t("admit_workflow", (None,), P, ("flow_admit",))  # its roots
    + _t("release_step", (None,), P, ("workflows",))  # its last parent ended
    + _t("release_step", (None,), F, ("workflows",))  # its inputs could not be built
    + _t("cancel_step", (None, P), F, ("workflows", "flow_cancel"))
    # A unique call held until its start, its end or for a period (unique.lua): admitted
    # as a new record while no record holds the call; a debounce moves a PENDING one's due
    # time and leaves its state.
    + _t("admit_unique", (None,), P, ("unique",))
    # A cancel (cancelling.py): queued or running, it ends FAILED; the running one under a
    # new fence, so its run's renewals and settlement are refused.
    + _t("cancel", (P, C), F, ("cancel",))
    # A bulk run's page (bulk.lua: a compare-and-set on each record's bytes as matched):
    # retry an ended record, fail a waiting one (purge deletes).
    + _t("bulk_retry", (K, F, D), P, ("bulk",))
    + _t("bulk_fail", (P,), F, ("bulk",))
    # Operator actions (operations.py: a compare-and-set on the bytes shown).
    + _t("retry_now", (P, C, K, F, D), P)
    + _t("mark_failed", (P, C), F)
)


def allowed(operation: str, source: State | None, target: State) -> bool:
    """Whether ``operation`` may take a record from ``source`` to ``target``."""
    return any(
        t.operation == operation and t.source is source and t.target is target for t in TRANSITIONS
    )
