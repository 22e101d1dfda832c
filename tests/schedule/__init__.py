"""Schedules and the scheduler: fire times, misfires, checks and ``ledger_scheduler``."""
