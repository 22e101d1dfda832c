"""Template tags of the ledger's admin pages."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import django.contrib.admin
from django import template

register = template.Library()


@cache
def crumbs_are_a_list() -> bool:
    """Whether this Django's admin writes its breadcrumbs as a list (``ol.breadcrumbs``).

    Django 6.1's admin styles ``ol.breadcrumbs`` and no longer ``div.breadcrumbs``;
    earlier ones the other way round. Read from the admin's own ``base.html``, so the
    ledger's pages write what the installed admin styles.
    """
    base = Path(django.contrib.admin.__file__).parent / "templates" / "admin" / "base.html"
    try:
        return '<ol class="breadcrumbs">' in base.read_text(encoding="utf-8")
    except OSError:
        return False


@register.simple_tag
def ledger_crumbs_as_list() -> bool:
    """Return whether breadcrumbs are written as ``ol.breadcrumbs`` (see above)."""
    return crumbs_are_a_list()
