"""Argument checks the ledger's operations share: each raises TypeError or ValueError."""

from __future__ import annotations

import re

from .records import State
from .results import Claim

__all__ = ["check_claim", "check_name", "positive_int", "settle_target"]

_NAME = re.compile(r"[^\s{}\x00-\x1f\x7f]{1,100}")


def check_name(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    if not _NAME.fullmatch(value):
        raise ValueError(
            f"{what} {value!r} is not usable: 1 to 100 characters, no whitespace, "
            "no braces, no control characters"
        )
    return value


def check_claim(claim: object) -> None:
    """Refuse anything but a Claim whose identity fields have their types, before any write.

    The values need no check: a claim the ledger did not hand out matches no record and
    answers LOST.
    """
    if claim.__class__ is not Claim and not isinstance(claim, Claim):
        raise TypeError(f"expected a Claim, not {type(claim).__name__}")
    if not (
        isinstance(claim.request_id, str)
        and isinstance(claim.owner, str)
        and type(claim.fence) is int
    ):
        raise TypeError("a Claim's request_id and owner must be str, its fence an int")


def settle_target(state: object) -> str:
    """Return the settle script's letter for ``state`` (identity tests: enum hashing is slow)."""
    if state is State.COMPLETED:
        return "K"
    if state is State.FAILED:
        return "F"
    if state is State.PENDING:
        return "P"
    if not isinstance(state, State):
        raise TypeError(f"state must be a State, not {type(state).__name__}")
    raise ValueError(f"a claim settles as COMPLETED, FAILED or PENDING, not {state.value}")


def positive_int(value: object, name: str, *, upper: int | None = None) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < 1 or (upper is not None and value > upper):
        bound = f" and at most {upper}" if upper is not None else ""
        raise ValueError(f"{name} must be at least 1{bound}, got {value}")
    return value
