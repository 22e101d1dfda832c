"""No control characters in ids: C0, DEL, C1 and U+2028/U+2029, refused in Python and Lua.

Python refuses them before anything reaches Redis; the admit script refuses the same
set for any caller that reaches it another way, so the two checks are held to one table.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_ledger import AdmissionStatus, Ledger
from django_ledger.core.records import id_problem, owner_problem

pytest_plugins = ["tests.support.ledger_fixtures"]

#: Every code point the ledger calls a control character.
CONTROLS = [*range(0x00, 0x20), *range(0x7F, 0xA0), 0x2028, 0x2029]


def _lua_admit(ledger: Ledger, request_id: str) -> int:
    """Call admit.lua directly, as a client other than this library would; answer its code."""
    reply = ledger.run(ledger.scripts.admit, [ledger.max_records, 0, "", 0, request_id, "payload"])
    return int(reply[1])


@pytest.mark.parametrize("code", [0x85, 0x9F, 0x80, 0x2028, 0x2029, 0x00, 0x1F, 0x7F])
def test_python_refuses_each_control_character(
    ledger_factory: Callable[..., Ledger], code: int
) -> None:
    ledger = ledger_factory()
    request_id = f"order{chr(code)}1042"
    assert id_problem(request_id) == "id_control_character"
    assert owner_problem(f"worker{chr(code)}") == "owner_control_character"
    answer = ledger.admit(request_id, "p")
    assert (answer.status, answer.reason) == (AdmissionStatus.REJECTED, "id_control_character")
    assert ledger.stats().total == 0
    with pytest.raises(ValueError, match="owner_control_character"):
        ledger.claim(f"worker{chr(code)}")


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(code=st.sampled_from(CONTROLS), prefix=st.text(max_size=5), suffix=st.text(max_size=5))
def test_lua_refuses_what_python_refuses(
    redis_client: object, namespace: str, code: int, prefix: str, suffix: str
) -> None:
    ledger = Ledger(redis_client, namespace, "lua-controls")
    request_id = prefix + chr(code) + suffix
    if any(0xD800 <= ord(c) <= 0xDFFF for c in request_id):
        return  # not UTF-8 at all: refused before any script, another reason
    assert _lua_admit(ledger, request_id) == 7
    assert ledger.redis.hlen(ledger.records_key) == 0


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    text=st.text(
        alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)),
        min_size=1,
        max_size=20,
    )
)
def test_python_and_lua_agree_on_every_text(
    redis_client: object, namespace: str, text: str
) -> None:
    ledger = Ledger(redis_client, namespace, "agree")
    python_refuses = id_problem(text) == "id_control_character"
    assert python_refuses == any(ord(c) in CONTROLS for c in text)
    code = _lua_admit(ledger, text)
    assert (code == 7) == python_refuses
    ledger.redis.delete(*ledger.keys)


def test_printable_non_ascii_ids_still_pass(ledger_factory: Callable[..., Ledger]) -> None:
    ledger = ledger_factory()
    for request_id in ("café-1", "注文-7", "🎉", "a\u00a0b", "x\u2027y", "\u202ax"):
        assert ledger.admit(request_id, "p").status is AdmissionStatus.ADMITTED, request_id
