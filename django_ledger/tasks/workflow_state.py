"""A workflow's status as the Django faces show it (``get_workflow``, the admin, the API).

Read from the core's ``WorkflowStatus``; nothing here needs Django's task framework, so
the admin and the API import it on a project without one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..core.flows import StepStatus, WorkflowStatus
from ..core.jobs import BadPayload, decode_result

__all__ = ["STEP_STATES", "WorkflowState", "WorkflowStep", "state_of"]

#: What a step's ``state`` may be (``WorkflowStep``).
STEP_STATES = (
    "WAITING",
    "PENDING",
    "CLAIMED",
    "COMPLETED",
    "FAILED",
    "DEAD",
    "CANCELLED",
    "GONE",
    "CORRUPT",
)


@dataclass(frozen=True)
class WorkflowStep:
    """One step as it stands: ``state`` is WAITING, PENDING, CLAIMED, COMPLETED, FAILED,
    DEAD, CANCELLED (ended by a failed parent or by ``cancel_workflow``) or GONE (purged)."""

    name: str
    task_id: str
    parents: tuple[str, ...]
    on_failure: str
    state: str
    task: str | None
    return_value: Any
    #: Each recorded error's last traceback line, oldest first.
    errors: list[str]
    cancelled_by: str | None
    waiting_for: int | None
    attempts: int


@dataclass(frozen=True)
class WorkflowState:
    """A workflow's steps in the order they were given (``get_workflow``).

    ``steps`` holds every step, or the page read (from ``offset``); ``total`` and
    ``counts`` (state -> how many steps) always cover the whole workflow.
    """

    id: str
    queue: str
    steps: list[WorkflowStep]
    cancelled: bool
    total: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    offset: int = 0

    @property
    def finished(self) -> bool:
        """Whether every step has ended."""
        return not any(self.counts.get(state) for state in ("WAITING", "PENDING", "CLAIMED"))

    @property
    def successful(self) -> bool:
        """Whether every step COMPLETED."""
        return self.counts.get("COMPLETED", 0) == self.total

    def step(self, name: str) -> WorkflowStep:
        for step in self.steps:
            if step.name == name:
                return step
        raise KeyError(name)

    @property
    def results(self) -> dict[str, Any]:
        """Step name -> return value, for the steps that completed."""
        return {s.name: s.return_value for s in self.steps if s.state == "COMPLETED"}


def _step(status: StepStatus) -> WorkflowStep:
    value: Any = None
    errors: list[str] = []
    try:
        doc = decode_result(status.result)
        value = doc.return_value
        for attempt in doc.attempts:
            if attempt.error:
                lines = str(attempt.error.get("traceback", "")).strip().splitlines()
                errors.append(
                    lines[-1] if lines else str(attempt.error.get("exception_class_path"))
                )
    except BadPayload:
        errors.append("the stored result is not a result document")
    task = None
    if status.record is not None:
        try:
            task = json.loads(status.record.payload).get("task")
        except (ValueError, AttributeError):
            task = None
    return WorkflowStep(
        status.name,
        status.request_id,
        status.parents,
        status.on_failure,
        status.state,
        task,
        value,
        errors,
        status.cancelled_by,
        status.waiting_for,
        status.record.attempts if status.record is not None else 0,
    )


def state_of(status: WorkflowStatus) -> WorkflowState:
    """The Django face of the core's ``WorkflowStatus``."""
    return WorkflowState(
        status.workflow_id,
        status.queue,
        [_step(s) for s in status.steps],
        status.cancelled,
        status.total,
        dict(status.counts),
        status.offset,
    )
