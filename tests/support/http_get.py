"""``GET`` a path of a worker's or a scheduler's HTTP endpoint (metrics, probes)."""

from __future__ import annotations

import urllib.error
import urllib.request

__all__ = ["get"]


def get(port: int, path: str) -> tuple[int, str] | None:
    """The status and body of ``GET path`` on the probes' port (``None``: no answer yet)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except (urllib.error.URLError, ConnectionError):
        return None
