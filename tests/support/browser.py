"""What the admin's browser tests do with a page: open one of a width, log it in.

The browser itself is the ``browser`` fixture of ``tests/support/browser_fixtures.py``.
"""

from __future__ import annotations

from typing import Any

#: The password of the superuser ``log_in`` makes.
PASSWORD = "correct horse battery staple"


def new_page(browser: Any, width: int = 1400, **context: Any) -> Any:
    """A page in a new context of ``browser``, ``width`` px wide and 900 high."""
    return browser.new_context(viewport={"width": width, "height": 900}, **context).new_page()


def log_in(
    page: Any,
    live_server: Any,
    django_user_model: Any,
    *,
    then: str | None = None,
    wait: str | None = "#content-main",
) -> Any:
    """Make the superuser ``operator`` and log ``page`` in as it; return the page.

    From the admin's index, or with ``then`` the login page that goes on to that path;
    ``wait``: a selector on the page the log-in leads to (``None``: do not wait).
    """
    django_user_model.objects.create_superuser("operator", "operator@example.com", PASSWORD)
    start = "/admin/" if then is None else f"/admin/login/?next={then}"
    page.goto(f"{live_server.url}{start}")
    page.fill("#id_username", "operator")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    if wait is not None:
        page.wait_for_selector(wait)
    return page


def fast_passwords(settings: Any) -> None:
    """Hash passwords fast: the default hasher is slow on purpose, a log-in would wait."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
