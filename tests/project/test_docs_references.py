"""User-facing strings name a page of the docs by its title, never a path in the repository.

A pip install has no docs/ directory: a hint, an exception, a command's output or the
API's schema that says ``docs/api.md`` points at nothing. Docstrings and comments may.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import yaml

from tests.support.settings_reference_loader import ROOT

PACKAGE = ROOT / "django_ledger"
DOCS_PATH = re.compile(r"docs/[^\s'\"]*\.md")
TITLED = re.compile(r"'([^']+)' (?:in|of) the django-ledger docs")


def docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string nodes that are docstrings (a module's, class's, function's, or
    an attribute's: a string alone as a statement)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            found.add(id(node.value))
    return found


def user_facing_strings(path: Path) -> list[tuple[int, str]]:
    """Every string literal of a module but its docstrings (f-strings' parts included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = docstrings(tree)
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
    ]


def test_no_string_but_a_docstring_names_a_docs_path() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {text!r}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, text in user_facing_strings(path)
        if DOCS_PATH.search(text)
    ]
    assert found == []


def test_the_scan_tells_a_docstring_from_a_message(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        '"""See docs/api.md."""\n'
        "def f():\n"
        '    """docs/tasks.md"""\n'
        "    raise ValueError('see docs/limits.md')\n",
        encoding="utf-8",
    )
    texts = [text for _, text in user_facing_strings(module)]
    assert [text for text in texts if DOCS_PATH.search(text)] == ["see docs/limits.md"]


def test_every_title_a_message_names_is_a_page_or_a_section_of_the_site() -> None:
    """'X' in the django-ledger docs: X is a title in mkdocs.yml's nav or a heading."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    titles: set[str] = set()

    def walk(items: list[object]) -> None:
        for item in items:
            if isinstance(item, dict):
                for title, value in item.items():
                    titles.add(title)
                    if isinstance(value, list):
                        walk(value)

    walk(config["nav"])
    for page in (ROOT / "docs").glob("*.md"):
        text = page.read_text(encoding="utf-8")
        titles.update(re.findall(r"^#{2,4} (.+)$", text, flags=re.MULTILINE))
    named: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for _, text in user_facing_strings(path):
            named.update(TITLED.findall(text))
            # "see 'Section' in 'Page' of the django-ledger docs"
            named.update(re.findall(r"see '([^']+)' in '[^']+' of the", text))
    assert named, "no message names a page"
    assert named - titles == set()
