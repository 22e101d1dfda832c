"""Every writer of a record keeps to the one table of state transitions (core/transitions.py).

Three views of it: the Lua sources (found by walking ``core/lua/`` whatever its
folders), the reference path's Python (``core/reference*.py``), and the states each
operation leaves behind when both paths are driven through the contract.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path

import redis

import django_ledger.core
from django_ledger import Ledger, State
from django_ledger.core.errors import CorruptRecord
from django_ledger.core.flows import FlowStep, admit_workflow
from django_ledger.core.records import decode_record
from django_ledger.core.transitions import TRANSITIONS, allowed

pytest_plugins = ["tests.support.ledger_fixtures"]

CORE = Path(django_ledger.core.__file__).parent
LETTERS = {state.letter.decode(): state for state in State}
P, C, K, F, D = State.PENDING, State.CLAIMED, State.COMPLETED, State.FAILED, State.DEAD

#: Names a script assigns a record's state from, and the states they carry.
VARIABLES: dict[str, set[State]] = {
    # settling.lua: a settlement's target ('C' and 'S' renew and never reach this
    # assignment; 'R' writes 'P' itself).
    "target": {P, K, F},
    # workflows.lua's flow_record(now, id, state, payload): its callers name the state.
    "state": set(),
    # codec.lua's decoder: the state read from the bytes, not a write.
    "s": set(),
}
_ASSIGN = re.compile(r"\b\w+\.s\s*(?:,\s*[\w.]+\s*)*=(?!=)\s*([^,\n]+)")  # r.s, r.x = 'P', y
_BUILD = re.compile(r"(?:^|[{,])\s*s\s*=(?!=)\s*([^,\n}]+)", re.MULTILINE)  # {s = 'P', ...}
_FLOW_RECORD = re.compile(r"\bflow_record\([^,()]+,[^,()]+,\s*([^,)]+)")


def _value(text: str, where: str) -> set[State]:
    text = text.strip()
    quoted = re.fullmatch(r"'(\w)'", text)
    if quoted:
        return {LETTERS[quoted.group(1)]}
    assert text in VARIABLES, f"{where}: a state written from {text!r}, not in the table"
    return VARIABLES[text]


def lua_writes() -> dict[str, set[State]]:
    """The states each Lua source writes, by file name without ``.lua``."""
    found: dict[str, set[State]] = {}
    for path in sorted((CORE / "lua").rglob("*.lua")):
        source = re.sub(r"--.*", "", path.read_text(encoding="utf-8"))
        states: set[State] = set()
        for pattern in (_ASSIGN, _BUILD, _FLOW_RECORD):
            for match in pattern.finditer(source):
                states |= _value(match.group(1), path.name)
        assert path.stem not in found, f"two Lua sources named {path.stem}"
        found[path.stem] = states
    return found


def _state_of(node: ast.expr, where: str) -> set[State]:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        assert node.value.id == "State", where
        return {State[node.attr]}
    if isinstance(node, ast.IfExp):
        return _state_of(node.body, where) | _state_of(node.orelse, where)
    raise AssertionError(f"{where}: a state written from {ast.unparse(node)}")


def reference_writes() -> dict[str, set[State]]:
    """The states each function of the reference path writes into a record it builds."""
    found: dict[str, set[State]] = {}
    for path in sorted(CORE.glob("reference*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in tree.body:
            if not isinstance(function, ast.FunctionDef):
                continue
            where = f"{path.name}: {function.name}"
            states: set[State] = set()
            for call in ast.walk(function):
                if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
                    continue
                if call.func.id not in ("replace", "Record"):
                    continue
                for keyword in call.keywords:
                    if keyword.arg == "state":
                        states |= _state_of(keyword.value, where)
                if call.func.id == "Record" and len(call.args) >= 3:
                    states |= _state_of(call.args[2], where)
            if states:
                found[function.name] = states
    return found


def test_each_lua_writer_writes_the_states_the_table_gives_it() -> None:
    written = lua_writes()
    expected: dict[str, set[State]] = {}
    for t in TRANSITIONS:
        for name in t.lua:
            expected.setdefault(name, set()).add(t.target)
    assert set(expected) <= set(written), "the table names a Lua source that is not there"
    assert {name: states for name, states in written.items() if states} == expected


def test_each_reference_writer_writes_the_states_the_table_gives_it() -> None:
    expected: dict[str, set[State]] = {}
    for t in TRANSITIONS:
        for name in t.reference:
            expected.setdefault(name, set()).add(t.target)
    assert reference_writes() == expected


def test_the_scan_sees_each_form_of_a_state_write() -> None:
    lua = lua_writes()
    assert lua["claiming"] == {C}  # r.s, r.owner, ... = 'C', ...
    assert lua["admit"] == {P}  # a table built over several lines
    assert lua["settling"] == {P, K, F}  # r.s = target
    assert lua["workflows"] == {P, F}  # flow_record(now, id, 'F', ...)
    assert lua["codec"] == set()  # decoding is no write
    assert reference_writes()["_settle"] == {P, K, F}  # a choice of two in one write


def _states(client: redis.Redis, ledger: Ledger) -> dict[str, State]:
    found = {}
    for raw_id, raw in client.hgetall(ledger.records_key).items():
        request_id = raw_id.decode()
        try:
            found[request_id] = decode_record(request_id, raw).state
        except CorruptRecord:
            continue
    return found


def _watch(client: redis.Redis, ledger: Ledger) -> Callable[..., None]:
    """Run a call; every state it changed must be allowed to one of ``operations``."""

    def step(operations: tuple[str, ...], call: Callable[[], object]) -> None:
        before = _states(client, ledger)
        call()
        after = _states(client, ledger)
        for request_id, state in after.items():
            source = before.get(request_id)
            if source is state:
                continue
            assert any(allowed(op, source, state) for op in operations), (
                f"{request_id}: {source} -> {state} by {operations}"
            )

    return step


def test_each_operation_moves_records_only_as_the_table_allows(
    ledger_factory: Callable[..., Ledger], redis_client: redis.Redis, optimized: bool
) -> None:
    ledger = ledger_factory(max_attempts=2)
    step = _watch(redis_client, ledger)
    ids = ["a", "b", "c", "d", "e", "f"]
    step(("admit",), lambda: ledger.admit_many([(i, "{}") for i in ids]))
    claims = {}
    step(("claim",), lambda: claims.update({c.request_id: c for c in ledger.claim_many("w", 6)}))
    assert set(claims) == set(ids)
    step(("renew",), lambda: ledger.renew(claims["a"]))
    step(("settle",), lambda: ledger.settle(claims["a"], State.COMPLETED))
    step(("settle",), lambda: ledger.settle(claims["b"], State.FAILED))
    step(("settle",), lambda: ledger.settle(claims["c"], State.PENDING))
    step(("release",), lambda: ledger.release([claims["d"]]))
    ledger.clock_skew_ms = 3_600_000  # every lease long expired
    step(("repair",), lambda: list(ledger.repair_cycle()))
    again = {}
    step(("claim",), lambda: again.update({c.request_id: c for c in ledger.claim_many("w", 6)}))
    ledger.clock_skew_ms = 7_200_000
    step(("repair",), lambda: list(ledger.repair_cycle()))  # e and f: a second claim, DEAD
    assert _states(redis_client, ledger)["e"] is State.DEAD
    ledger.close_gate()
    step(("import",), lambda: ledger.import_record("g", "{}", State.FAILED, 0, ""))
    ledger.open_gate()
    assert {s for s in _states(redis_client, ledger).values()} == {P, K, F, D}
    if not optimized:
        return  # workflows run on the fused path only
    flow = [FlowStep("p", "{}"), FlowStep("q", "{}"), FlowStep("x", "{}", parents=("p",))]
    flow.append(FlowStep("y", "{}", parents=("q",)))
    step(("admit_workflow",), lambda: admit_workflow(ledger, "wf", flow))
    mine = {}
    step(("claim",), lambda: mine.update({c.request_id: c for c in ledger.claim_many("v", 9)}))
    step(("settle", "release_step"), lambda: ledger.settle(mine["wf:p"], State.COMPLETED))
    step(("settle", "cancel_step"), lambda: ledger.settle(mine["wf:q"], State.FAILED))
    states = _states(redis_client, ledger)
    assert (states["wf:x"], states["wf:y"]) == (P, F)
