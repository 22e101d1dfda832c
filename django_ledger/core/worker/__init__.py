"""The worker runtime: runs jobs from ledger queues, Django-free (``runtime.Worker``)."""

from .handler import Backoff, CallableHandler, Handler, Job, Outcome, Plan
from .heartbeat import Heartbeats, WorkerInfo
from .runtime import Worker, WorkerConfig, default_worker_id

__all__ = [
    "Backoff",
    "CallableHandler",
    "Handler",
    "Heartbeats",
    "Job",
    "Outcome",
    "Plan",
    "Worker",
    "WorkerConfig",
    "WorkerInfo",
    "default_worker_id",
]
