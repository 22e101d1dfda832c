"""The API's JSON parser and renderer: DRF's, pinned, with a body's nesting bounded.

Python's ``json`` recurses once per level of nesting, so a body nested about a
thousand levels deep raises ``RecursionError`` inside the parser. The parser here
measures the nesting first, with a loop rather than recursion, and refuses a body
nested deeper than ``MAX_DEPTH`` with ``400 parse_error`` before ``json`` sees it. No
request of the API needs more than four levels.

Both classes fix what DRF would otherwise read from ``REST_FRAMEWORK`` when it is
imported (``STRICT_JSON``, ``UNICODE_JSON``, ``COMPACT_JSON``), so a project's settings
do not change what the API accepts or how it answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from django.conf import settings
from django.utils.translation import gettext
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser
from rest_framework.renderers import JSONRenderer
from rest_framework.utils import json

from ..core.jobs import nesting_depth  # one loop counts nesting, for bodies and payloads

__all__ = ["MAX_DEPTH", "LedgerJSONParser", "LedgerJSONRenderer", "nesting_depth"]

#: The deepest nesting of arrays and objects a body may have (the top level is 1).
MAX_DEPTH = 64


class LedgerJSONParser(JSONParser):
    """Parse a JSON body: strict (no NaN or Infinity), at most ``MAX_DEPTH`` levels deep."""

    strict = True

    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        encoding = _encoding(parser_context or {})
        try:
            text = stream.read().decode(encoding)
        except UnicodeDecodeError as exc:
            raise ParseError(gettext("JSON parse error - %(error)s") % {"error": exc}) from exc
        if nesting_depth(text) > MAX_DEPTH:
            raise ParseError(
                gettext("JSON parse error - nested deeper than %(depth)d levels")
                % {"depth": MAX_DEPTH}
            )
        try:
            return json.loads(text, parse_constant=json.strict_constant)
        except (ValueError, RecursionError) as exc:
            raise ParseError(gettext("JSON parse error - %(error)s") % {"error": exc}) from exc


class LedgerJSONRenderer(JSONRenderer):
    """DRF's JSON renderer with its options fixed: UTF-8 text, compact, strict."""

    ensure_ascii = False
    compact = True
    strict = True


def _encoding(parser_context: Mapping[str, Any]) -> str:
    """Return the body's charset; only text encodings (``bz2_codec`` would decompress)."""
    encoding = parser_context.get("encoding") or settings.DEFAULT_CHARSET
    try:
        "".encode(encoding)
    except (LookupError, UnicodeError, TypeError):
        raise ParseError(
            gettext('Unsupported charset "%(encoding)s" in request Content-Type header.')
            % {"encoding": encoding}
        ) from None
    return str(encoding)
