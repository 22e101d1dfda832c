"""``run_due_tasks()``: what is due, run in-process as a worker would (``tasks/inline.py``)."""

from ..tasks.inline import RunReport, TaskFailed, run_due_tasks, task_queues

__all__ = ["RunReport", "TaskFailed", "run_due_tasks", "task_queues"]
