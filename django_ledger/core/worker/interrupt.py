"""Ending a job's thread that ran past its time-out: an exception raised inside it."""

from __future__ import annotations

import ctypes

__all__ = ["TimedOut", "interrupt"]


class TimedOut(BaseException):
    """Raised inside a job's thread that ran past its time-out (see ``interrupt``).

    A ``BaseException``, so that a handler's ``except Exception`` does not swallow it.
    """


def interrupt(thread_id: int) -> None:
    """Raise ``TimedOut`` in a thread at its next Python instruction.

    A thread blocked inside C code (a socket read without a time-out) is not reached
    until it returns to Python; its outcome is ignored either way. Use ``--processes``
    where a time-out must stop the work itself.
    """
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(TimedOut)
    )
