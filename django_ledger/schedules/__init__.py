"""The Django face of the scheduler: ``LEDGER['SCHEDULES']`` typed, and admission of fires.

``config`` checks and types each schedule (the system checks use the same code);
``admission`` admits a fire as the task it names. The service the commands and the
admin call is ``django_ledger.services.scheduler``.
"""

from .admission import admit_fire, ledger_task
from .config import Problem, ScheduleConfig, configured_schedules, problems, schedule_of

__all__ = [
    "Problem",
    "ScheduleConfig",
    "admit_fire",
    "configured_schedules",
    "ledger_task",
    "problems",
    "schedule_of",
]
