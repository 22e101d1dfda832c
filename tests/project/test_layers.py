"""The house's layering: the core knows nothing of Django, and nothing imports back up.

Checks that cannot rot quietly: the core is imported and used in a subprocess where
Django cannot be imported at all, and the import graph of ``django_ledger/`` (read from
the source, every ``import`` counted, lazy and ``TYPE_CHECKING`` ones too) is checked for
edges from the core upward, for cycles between modules, and, one level up, for imports
between packages that ``LAYERS`` does not allow and for cycles between packages. Each
checker is also run on a small tree made to break its rule, so a checker that stopped
seeing would fail here. Last: nothing in ``django_ledger`` but ``core/lane.py`` reaches
into a redis-py object's private attributes (an AST walk; the private names it meets
elsewhere are Django's or the project's own, listed).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "django_ledger"

#: The packages (and top-level modules) of ``django_ledger`` and what each may import of
#: the project, lowest layer first; ``docs/architecture.md`` shows the same table. A
#: module belongs to the package of its first name under ``django_ledger``
#: (``core.dispatch`` is the core's), but for the core's rooms of their own, ``SUBPACKAGES``.
LAYERS: dict[str, set[str]] = {
    "core": set(),
    "core.worker": {"core"},
    "core.schedule": {"core"},
    "defaults": {"core"},
    "connections": {"core", "defaults"},
    "conf": {"core", "defaults", "connections"},
    "__init__": {"core", "conf"},
    "operations": {"core"},
    "permissions": {"conf"},
    "queues": {"core", "conf"},
    "outbox": {"core", "defaults", "connections", "conf", "queues"},
    "models": {"outbox"},
    "tasks": {"core", "core.worker", "defaults", "connections", "conf", "queues", "outbox"},
    "schedules": {"core", "core.schedule", "defaults", "conf", "tasks"},
    "services": {
        "core",
        "core.worker",
        "core.schedule",
        "conf",
        "queues",
        "outbox",
        "tasks",
        "schedules",
    },
    "checks": {
        "core",
        "core.worker",
        "defaults",
        "connections",
        "conf",
        "queues",
        "outbox",
        "tasks",
        "schedules",
    },
    "admin": {
        "core",
        "core.worker",
        "core.schedule",
        "conf",
        "operations",
        "permissions",
        "models",
        "tasks",
        "schedules",
        "services",
    },
    "api": {"core", "conf", "permissions", "tasks", "services"},
    "management": {"core", "core.worker", "core.schedule", "conf", "checks", "services", "api"},
    "apps": {"checks"},
    # The testing kit: runs tasks as the worker's handler does, reads what waits.
    "testing": {"core", "core.worker", "conf", "queues", "tasks"},
    "migrations": set(),
    "templatetags": set(),
}
#: Packages inside a package that are layers of their own.
SUBPACKAGES = ("core.worker", "core.schedule")

# Makes ``django`` (and so every Django-layer module) unimportable, then uses the core.
_PROBE = """
import sys

class NoDjango:
    def find_spec(self, name, path=None, target=None):
        if name == "django" or name.startswith("django."):
            raise ImportError(f"the core imported {name}")
        return None

sys.meta_path.insert(0, NoDjango())
import redis
from django_ledger.core import Ledger, MemoryDispatchRegistry, RedisDispatchRegistry, State
import django_ledger.core.ledger, django_ledger.core.reference, django_ledger.core.fused

client = redis.Redis.from_url(sys.argv[1])
for optimized in (True, False):
    ledger = Ledger(client, sys.argv[2], f"layers-{optimized}", optimized=optimized)
    assert ledger.admit(f"job-{optimized}", "{}").status.name == "ADMITTED"
    claim = ledger.claim("worker-1")
    assert claim is not None and claim.request_id == f"job-{optimized}"
    assert ledger.settle(claim, State.COMPLETED).status.name == "SETTLED"
    assert ledger.stats().completed == 1
registry = RedisDispatchRegistry(client, namespace=sys.argv[2])
assert registry.claim_dispatch("nightly", 1_764_493_200, "node-1")
assert MemoryDispatchRegistry().claim_dispatch("nightly", 1_764_493_200, "node-1")
print(sorted({m.split(".")[0] for m in sys.modules} & {"django", "rest_framework"}))
"""


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, root: Path) -> set[str]:
    """Return every module ``path`` imports (absolute names), wherever the import stands."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            # ``from . import conf`` imports the module ``conf``, not only the package.
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


def graph(root: Path) -> dict[str, set[str]]:
    """Map each module of the package at ``root`` to the package's modules it imports."""
    modules = {module_name(path, root): path for path in root.rglob("*.py")}
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges[name] = {
            target
            for target in imports_of(path, root)
            if target in modules and target != name and not name.startswith(target + ".")
        }
    return edges


def upward_imports(root: Path) -> list[str]:
    """Say which core modules import Django or a module of the Django layer."""
    core = f"{root.name}.core"
    bad = []
    for path in (root / "core").rglob("*.py"):
        name = module_name(path, root)
        for target in imports_of(path, root):
            top = target.split(".")[0]
            layer = target.startswith(root.name + ".") and not (
                target == core or target.startswith(core + ".")
            )
            if top in ("django", "rest_framework", "django_redis") or layer:
                bad.append(f"{name} imports {target}")
    return sorted(bad)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Return one cycle through each strongly connected group of modules (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def package_of(module: str) -> str:
    """The layer ``module`` (an absolute name) belongs to."""
    inner = module.partition(".")[2]
    for sub in SUBPACKAGES:
        if inner == sub or inner.startswith(sub + "."):
            return sub
    return inner.split(".")[0] or "__init__"


def package_imports(edges: dict[str, set[str]]) -> dict[str, dict[str, list[str]]]:
    """Map each package to the packages it imports, each with the module edges that do."""
    found: dict[str, dict[str, list[str]]] = {}
    for source, targets in edges.items():
        importer = package_of(source)
        found.setdefault(importer, {})
        for target in sorted(targets):
            imported = package_of(target)
            if imported != importer:
                found[importer].setdefault(imported, []).append(f"{source} -> {target}")
    return found


def layer_breaches(edges: dict[str, set[str]], layers: dict[str, set[str]]) -> list[str]:
    """Say which package imports one that ``layers`` does not let it (or is not in it)."""
    bad = []
    for importer, imported in sorted(package_imports(edges).items()):
        if importer not in layers:
            bad.append(f"{importer} is not in the layer table")
            continue
        for target, lines in sorted(imported.items()):
            if target not in layers[importer]:
                bad.append(f"{importer} imports {target} ({lines[0]})")
    return bad


def test_the_core_imports_and_works_with_django_unimportable(
    redis_server: RedisServer, namespace: str
) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, redis_server.url, namespace],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_nothing_in_the_core_imports_django_or_the_django_layer() -> None:
    assert upward_imports(PACKAGE) == []


def test_the_import_graph_has_no_cycles() -> None:
    edges = graph(PACKAGE)
    assert "django_ledger.core.ledger" in edges  # the graph covers the core
    assert "django_ledger.admin.actions" in edges  # and the Django layer
    assert cycles(edges) == []


def test_packages_import_only_the_layers_below_them() -> None:
    assert layer_breaches(graph(PACKAGE), LAYERS) == []


def test_the_packages_import_each_other_in_no_circle() -> None:
    packages = package_imports(graph(PACKAGE))
    assert {"core", "core.worker", "tasks", "outbox", "checks", "queues"} <= set(packages)
    assert cycles({name: set(imported) for name, imported in packages.items()}) == []
    assert cycles(LAYERS) == []  # the table allows no circle either


def documented_layers(text: str) -> dict[str, set[str]]:
    """The layer table of ``docs/architecture.md``, between its ``layers`` marks."""
    table = text.split("<!-- layers -->", 1)[1].split("<!-- /layers -->", 1)[0]
    found: dict[str, set[str]] = {}
    for line in table.strip().splitlines()[2:]:
        package, allowed = (cell.strip() for cell in line.strip("|").split("|"))
        found[package.strip("`")] = {
            name.strip().strip("`") for name in allowed.split(",") if name.strip().startswith("`")
        }
    return found


def test_the_architecture_page_shows_the_same_layer_table() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert documented_layers(text) == LAYERS
    assert list(documented_layers(text)) == list(LAYERS)  # in the same order


def test_the_outbox_knows_nothing_of_tasks() -> None:
    assert "tasks" not in package_imports(graph(PACKAGE))["outbox"]


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "django_ledger"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


@pytest.mark.parametrize(
    "line",
    [
        "import django\n",
        "from django.conf import settings\n",
        "def lazy():\n    from ..conf import ledger_settings\n",
        "from django_ledger.admin import base\n",
    ],
)
def test_the_layer_check_sees_a_deliberate_django_import_in_the_core(
    tmp_path: Path, line: str
) -> None:
    root = _tree(
        tmp_path,
        {"__init__.py": "", "conf.py": "", "core/__init__.py": "", "core/ledger.py": line},
    )
    assert upward_imports(root) == [
        f"django_ledger.core.ledger imports {target}"
        for target in sorted(imports_of(root / "core" / "ledger.py", root))
    ]
    assert upward_imports(root)


def test_the_cycle_check_sees_a_circle_even_behind_type_checking(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "admin/__init__.py": "",
            "admin/base.py": "from .actions import act_view\n",
            "admin/actions.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from .base import LedgerModelAdmin\n"
            ),
            "admin/records.py": "from .base import LedgerModelAdmin\n",
        },
    )
    assert cycles(graph(root)) == [["django_ledger.admin.actions", "django_ledger.admin.base"]]


def _two_packages(tmp_path: Path) -> Path:
    """Tasks stage rows in the outbox, and the outbox's delivery reaches back into tasks."""
    return _tree(
        tmp_path,
        {
            "__init__.py": "",
            "outbox/__init__.py": "",
            "outbox/staging.py": "",
            "outbox/delivery.py": "def lazy():\n    from ..tasks.store import queues\n",
            "tasks/__init__.py": "",
            "tasks/store.py": "",
            "tasks/backend.py": "from ..outbox.staging import stage\n",
        },
    )


def test_the_package_cycle_check_sees_a_circle_no_module_cycle_shows(tmp_path: Path) -> None:
    edges = graph(_two_packages(tmp_path))
    assert cycles(edges) == []  # module by module there is no circle
    packages = {name: set(imported) for name, imported in package_imports(edges).items()}
    assert cycles(packages) == [["outbox", "tasks"]]


def test_the_layer_check_names_an_import_the_table_forbids(tmp_path: Path) -> None:
    edges = graph(_two_packages(tmp_path))
    layers = {"__init__": set(), "outbox": set(), "tasks": {"outbox"}}
    assert layer_breaches(edges, layers) == [
        "outbox imports tasks (django_ledger.outbox.delivery -> django_ledger.tasks.store)"
    ]
    assert layer_breaches(edges, {"outbox": {"tasks"}, "tasks": {"outbox"}}) == [
        "__init__ is not in the layer table"
    ]


# -- redis-py's private attributes ---------------------------------------------------------

#: Private names of Django's and the standard library's (a model's ``_meta``, a
#: manager, a named tuple's ``_asdict``, ``os._exit``, DRF's ``request._request``,
#: Django's ``OutputWrapper._out`` and ``Atomic._from_testcase``): reached anywhere.
NOT_REDIS_PY = {
    "_meta",
    "_default_manager",
    "_asdict",
    "_fields",
    "_exit",
    "_request",
    "_out",
    "_from_testcase",
}
#: The project's own private names, reached on its own objects, where they are.
OWN = {
    ("admin/query.py", "_ledgers"),  # a LedgerQuery clone's
    ("core/reading.py", "_read_fields"),  # the ledger's own field reads
    ("admin/query.py", "_notes"),
    ("admin/query.py", "_total"),
    ("tasks/workflows.py", "_plan"),  # the project's LedgerBackend
    ("tasks/workflows.py", "_queue"),
    ("outbox/staging.py", "_ledger_outbox"),  # the project's mark on a DB connection
}


def private_reaches(source: str, where: str) -> set[tuple[str, str]]:
    """``obj._name`` and ``getattr(obj, "_name")`` in ``source``, ``self``/``cls`` aside."""
    tree = ast.parse(source, where)
    found: set[tuple[str, str]] = set()
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Attribute):
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in {"self", "cls"}:
                continue
            if isinstance(owner, ast.Call) and getattr(owner.func, "id", "") == "super":
                continue
            name = node.attr
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", "") in {"getattr", "setattr", "hasattr"}
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            name = node.args[1].value
        if name and name.startswith("_") and not (name.startswith("__") and name.endswith("__")):
            found.add((where, name))
    return found


def test_nothing_but_the_lane_reaches_into_private_attributes() -> None:
    found: set[tuple[str, str]] = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        if where != "core/lane.py":
            found |= private_reaches(path.read_text(), where)
    assert {(where, name) for where, name in found if name not in NOT_REDIS_PY} - OWN == set()


def test_the_walk_sees_a_private_reach() -> None:
    # A retry policy's private counter (``policy._retries``), and a getattr.
    planted = "def f(policy, c):\n    return policy._retries, getattr(c, '_sock'), self._own\n"
    assert private_reaches(planted, "planted.py") == {
        ("planted.py", "_retries"),
        ("planted.py", "_sock"),
    }
