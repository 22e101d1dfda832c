"""The release rule of workflows against a simple model (hypothesis) (the fused path, the only one with workflows).

A random graph of steps (each with its parents among the earlier ones and a failure rule)
is run step by step: each round claims what is due, checks it is exactly what the model
says is runnable, with exactly the inputs the model expects, and ends one of them as
COMPLETED or FAILED (or gives it back as a retry). The model: a step waits until every
parent has ended; a parent ending FAILED (or cancelled) cancels a waiting ``cancel``
dependant at once, which ends its own dependants the same way.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_ledger import Ledger, State
from django_ledger.core.flows import FlowStep, admit_workflow, read_workflow
from django_ledger.core.jobs import ResultDoc, encode_result

_RUNS = itertools.count()
MODEL = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@st.composite
def graphs(draw: st.DrawFn) -> list[tuple[tuple[int, ...], str]]:
    """Steps as (parent indexes, on_failure); parents are earlier steps."""
    size = draw(st.integers(1, 7))
    steps = []
    for i in range(size):
        parents = draw(st.lists(st.integers(0, i - 1), unique=True, max_size=3)) if i else []
        steps.append((tuple(sorted(parents)), draw(st.sampled_from(["cancel", "continue"]))))
    return steps


def flow_steps(graph: list[tuple[tuple[int, ...], str]]) -> list[FlowStep]:
    out = []
    for i, (parents, rule) in enumerate(graph):
        payload = json.dumps({"args": [], "step": i})
        if not parents:
            out.append(FlowStep(str(i), payload))
            continue
        out.append(
            FlowStep(
                str(i),
                payload,
                parents=tuple(str(p) for p in parents),
                on_failure=rule,
                inputs="spread",
                head='{"args":[',
                tail=f'],"step":{i}}}',
            )
        )
    return out


class Model:
    def __init__(self, graph: list[tuple[tuple[int, ...], str]]) -> None:
        self.graph = graph
        self.state = ["PENDING" if not parents else "WAITING" for parents, _ in graph]
        self.value: dict[int, Any] = {}

    def children(self, i: int) -> list[int]:
        return [c for c, (parents, _) in enumerate(self.graph) if i in parents]

    def end(self, i: int, state: str, value: Any = None) -> None:
        self.state[i] = state
        self.value[i] = value
        work = [i]
        while work:
            parent = work.pop()
            failed = self.state[parent] != "COMPLETED"
            for child in self.children(parent):
                if self.state[child] != "WAITING":
                    continue
                if failed and self.graph[child][1] == "cancel":
                    self.state[child] = "CANCELLED"
                    work.append(child)
                elif all(self.state[p] not in ("WAITING", "PENDING") for p in self.graph[child][0]):
                    self.state[child] = "PENDING"

    def inputs(self, i: int) -> list[Any]:
        return [self.value.get(p) for p in self.graph[i][0]]


@MODEL
@given(graph=graphs(), data=st.data())
def test_the_release_rule_follows_the_model(
    redis_client: redis.Redis, namespace: str, graph: Any, data: st.DataObject
) -> None:
    ledger = Ledger(redis_client, namespace, f"m{next(_RUNS)}")
    try:
        model = Model(graph)
        assert admit_workflow(ledger, "f", flow_steps(graph)).status.name == "ADMITTED"
        retried: set[int] = set()
        while True:
            claims = {int(c.request_id.split(":")[1]): c for c in ledger.claim_many("w", 16)}
            runnable = {i for i, s in enumerate(model.state) if s == "PENDING"}
            assert set(claims) == runnable
            for i, claim in claims.items():
                assert json.loads(claim.payload) == {"args": model.inputs(i), "step": i}
            if not claims:
                break
            chosen = data.draw(st.sampled_from(sorted(claims)))
            outcomes = ["COMPLETED", "FAILED"] + ([] if chosen in retried else ["RETRY"])
            outcome = data.draw(st.sampled_from(outcomes))
            others = [c for i, c in claims.items() if i != chosen]
            ledger.release(others)
            claim = claims[chosen]
            if outcome == "RETRY":  # a retry keeps its place: nothing moves on
                retried.add(chosen)
                ledger.settle(claim, State.PENDING)
            elif outcome == "COMPLETED":
                doc = ResultDoc(has_return_value=True, return_value={"from": chosen})
                ledger.settle(claim, State.COMPLETED, result=encode_result(doc))
                model.end(chosen, "COMPLETED", {"from": chosen})
            else:
                ledger.settle(claim, State.FAILED, result='{"v":1,"attempts":[]}')
                model.end(chosen, "FAILED")
            status = read_workflow(ledger, "f")
            assert status is not None
            assert [s.state for s in status.steps] == model.state
        status = read_workflow(ledger, "f")
        assert status is not None and status.finished
    finally:
        redis_client.delete(*ledger.keys)
