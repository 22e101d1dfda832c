"""Showing stored values safely: escaped bytes, pretty payloads, human durations."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING

from django.utils import translation
from django.utils.text import slugify
from django.utils.translation import gettext, ngettext

from ..core.errors import CorruptRecord
from ..core.records import decode_record, ms_to_datetime

if TYPE_CHECKING:
    from django.utils.functional import _StrOrPromise as StrOrPromise

__all__ = [
    "Label",
    "bytes_count",
    "bytes_text",
    "count_text",
    "decode_error",
    "duration_text",
    "escape_bytes",
    "instant_text",
    "period_text",
    "pretty_payload",
    "relative_text",
    "sentence",
]

# Printable ASCII but the backslash, which escapes everything else.
_UNPRINTABLE = re.compile(r"[^\x20-\x5b\x5d-\x7e]")


def escape_bytes(raw: bytes, limit: int | None = None) -> tuple[str, bool]:
    """Return ``raw`` as printable ASCII (``\\xNN`` escapes), cut at ``limit`` bytes.

    The second value says whether it was cut. The text still needs HTML escaping,
    which templates do.
    """
    cut = limit is not None and len(raw) > limit
    shown = raw[:limit] if cut else raw
    text = _UNPRINTABLE.sub(_escape_char, shown.decode("latin-1"))
    return text, cut


def _escape_char(match: re.Match[str]) -> str:
    char = match.group()
    return "\\\\" if char == "\\" else f"\\x{ord(char):02x}"


def pretty_payload(payload: str) -> tuple[str, bool]:
    """Return the payload indented if it is JSON, and whether it was."""
    try:
        value = json.loads(payload)
    except (ValueError, RecursionError):
        return payload, False
    try:
        return json.dumps(value, indent=2, ensure_ascii=False), True
    except RecursionError:
        return payload, False  # indenting recurses deeper than decoding did


def decode_error(request_id: str, raw: bytes) -> str:
    """Return why ``raw`` fails to decode as ``request_id``'s record ('' if it decodes)."""
    try:
        decode_record(request_id, raw)
    except CorruptRecord as exc:
        return exc.reason
    return ""


def duration_text(ms: int | None) -> str:
    """Return a duration in the largest two units that matter (``'3 h 12 min'``)."""
    if ms is None:
        return "-"
    seconds = ms // 1000
    if seconds < 60:
        return f"{ms / 1000:.1f} s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60), ("s", 1)):
        if seconds >= size:
            parts.append(f"{seconds // size} {unit}")
            seconds %= size
        if len(parts) == 2:
            break
    return " ".join(parts)


def instant_text(ms: int | None) -> str:
    """Return an epoch-ms instant as UTC text to the millisecond."""
    if ms is None:
        return "-"
    return ms_to_datetime(ms).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def relative_text(ms: int | None, now: int) -> str:
    """Return how far ``ms`` is from ``now``: ``'in 3 min'`` or ``'2 h 5 min ago'``."""
    if ms is None:
        return ""
    if ms >= now:
        return gettext("in %(duration)s") % {"duration": duration_text(ms - now)}
    return gettext("%(duration)s ago") % {"duration": duration_text(now - ms)}


class Label(str):
    """A label in the user's language that keeps a stable slug of its English words.

    Pages put the slug in data attributes (``data-field``, ``data-figure``, ...), so what
    reads them (tests, scripts) does not depend on the language.
    """

    slug: str

    @classmethod
    def of(cls, text: StrOrPromise) -> Label:
        with translation.override(None):  # no catalog: the English it was written in
            english = str(text)
        made = cls(str(text))
        made.slug = slugify(english)
        return made


def sentence(text: str) -> str:
    """Return ``text`` ending in one full stop: messages often end in one already."""
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else f"{text}."


def count_text(value: int) -> str:
    """Return a count with thousands separated: ``'100,000'``."""
    return f"{value:,}"


def bytes_count(value: int) -> str:
    """Return a number of bytes as is: ``'1234 bytes'``."""
    return ngettext("%(count)s byte", "%(count)s bytes", value) % {"count": value}


def bytes_text(value: int) -> str:
    """Return a size in bytes, and in KiB or MiB when it is a whole number of them."""
    for unit, size in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if value >= size and value % size == 0:
            return ngettext(
                "%(count)s byte (%(size)s %(unit)s)", "%(count)s bytes (%(size)s %(unit)s)", value
            ) % {"count": f"{value:,}", "size": f"{value // size:,}", "unit": unit}
    return ngettext("%(count)s byte", "%(count)s bytes", value) % {"count": f"{value:,}"}


_UNITS: tuple[tuple[int, Callable[[int], str]], ...] = (
    (86400, lambda n: ngettext("%(count)s day", "%(count)s days", n)),
    (3600, lambda n: ngettext("%(count)s hour", "%(count)s hours", n)),
    (60, lambda n: ngettext("%(count)s minute", "%(count)s minutes", n)),
    (1, lambda n: ngettext("%(count)s second", "%(count)s seconds", n)),
)


def period_text(value: timedelta) -> str:
    """Return a setting's duration in words: ``'7 days'``, ``'1 hour 30 minutes'``."""
    ms = round(value.total_seconds() * 1000)
    if ms % 1000:
        return gettext("%(count)s seconds") % {"count": f"{ms / 1000:g}"}
    seconds, parts = ms // 1000, []
    for size, words in _UNITS:
        if seconds >= size:
            count, seconds = divmod(seconds, size)
            parts.append(words(count) % {"count": f"{count:,}"})
    return " ".join(parts) or ngettext("%(count)s second", "%(count)s seconds", 0) % {"count": 0}
