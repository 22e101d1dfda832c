"""The app of ``benchmarks/workflow_bench.py``'s tasks (the worker imports the task
modules of installed apps only); it connects no signal receivers."""

from __future__ import annotations

from django.apps import AppConfig


class WorkflowBenchConfig(AppConfig):
    name = "tests.support.workflow_bench_app"
    label = "workflow_bench_app"
