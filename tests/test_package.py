"""The package's shape: the public API pinned to the contract, the layers (core, kafka edge,
runtime, entry points) kept apart, no import circle, one exception tree, no re-export modules,
py.typed."""

from __future__ import annotations

import ast
import graphlib
import importlib
import inspect
import itertools
import pkgutil
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import mirrorlib
import mirrorlib.core
from mirrorlib.errors import MirrorError

# ../shared/CONTRACT.md, "Imports". Adding a name is a deliberate act: update this list.
CONTRACT = {
    "ReplicationPolicy",
    "DefaultReplicationPolicy",
    "IdentityReplicationPolicy",
    "Checkpoint",
    "Heartbeat",
    "OffsetSync",
    "OffsetTranslator",
    "MirrorConfig",
    "FlowConfig",
    "Replicator",
    "MirrorClient",
    "translate_offsets",
    "TopicPartition",
    "OffsetAndMetadata",
    "MirrorError",
    "ConfigError",
    "CodecError",
}
# Names exported on purpose beyond the contract.
EXTRAS = {"ClusterError", "Predicate", "Transform", "TransformRecord"}  # (transforms: issue 37)
# Contract names whose implementation has not landed yet (each belongs to an open issue).
NOT_YET: set[str] = set()


def test_all_is_pinned() -> None:
    assert set(mirrorlib.__all__) == (CONTRACT - NOT_YET) | EXTRAS
    assert len(mirrorlib.__all__) == len(set(mirrorlib.__all__))


def test_every_exported_name_resolves() -> None:
    for name in mirrorlib.__all__:
        assert getattr(mirrorlib, name) is not None, name


def test_errors_share_one_root() -> None:
    for name in ("ConfigError", "CodecError", "ClusterError"):
        assert issubclass(getattr(mirrorlib, name), mirrorlib.MirrorError)


def test_py_typed_ships() -> None:
    assert (Path(mirrorlib.__file__).parent / "py.typed").is_file()


# -- the pure core ----------------------------------------------------------------------------


def _modules(package: str) -> list[str]:
    pkg = importlib.import_module(package)
    found = [m.name for m in pkgutil.walk_packages(pkg.__path__, f"{package}.")]
    return [package, *sorted(n for n in found if not n.endswith(".__main__"))]


PURE = [*_modules("mirrorlib.core"), "mirrorlib", "mirrorlib.errors"]

_BLOCKER = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('confluent_kafka', 'pyspark'):
            raise ImportError('pure core imported ' + name)
        return None
sys.meta_path.insert(0, Block())
import importlib
importlib.import_module(sys.argv[1])
leaked = [m for m in sys.modules if m.split('.')[0] in ('confluent_kafka', 'pyspark')]
assert not leaked, leaked
"""


def test_every_core_module_is_checked() -> None:
    assert {
        "mirrorlib.core.failover",
        "mirrorlib.core.batches",
        "mirrorlib.core.config.keys",
    } <= set(PURE)


@pytest.mark.parametrize("module", PURE)
def test_pure_core_imports_neither_confluent_kafka_nor_pyspark(module: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _BLOCKER, module],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


# -- the layers, read from the source -----------------------------------------------------------

SRC = Path(mirrorlib.__file__).parent

# What each layer may import from mirrorlib (besides itself); "" is the package root (the public
# API). The package root re-exports from every layer and is not a layer.
MAY_IMPORT = {
    "core": {"errors"},
    "kafka": {"errors", "core"},
    "runtime": {"errors", "core", "kafka"},
    "cli": {"", "errors", "core", "kafka", "runtime", "testing"},
    "spark": {"", "errors", "core", "kafka", "runtime"},
    "testing": {"errors"},
    "errors": set(),
}
# confluent-kafka is used by the edge only, and by the test bed, which hands out confluent-kafka
# clients to tests by design (KafkaCluster.produce/consume, admin_client).
CONFLUENT_KAFKA_LAYERS = {"kafka", "testing"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(tree: ast.AST) -> Iterator[tuple[str, int, bool]]:
    """``(imported module, line, only for type checking)`` of every import in ``tree``."""

    def walk(node: ast.AST, typing_only: bool) -> Iterator[tuple[str, int, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and ast.unparse(child.test) in (
                "TYPE_CHECKING",
                "typing.TYPE_CHECKING",
            ):
                for stmt in child.body:
                    yield from walk(ast.Module(body=[stmt], type_ignores=[]), True)
                for stmt in child.orelse:
                    yield from walk(ast.Module(body=[stmt], type_ignores=[]), typing_only)
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield alias.name, child.lineno, typing_only
            elif isinstance(child, ast.ImportFrom):
                assert child.level == 0, "relative import"
                yield child.module or "", child.lineno, typing_only
            yield from walk(child, typing_only)

    yield from walk(tree, False)


def _sources() -> list[tuple[str, ast.Module]]:
    return [
        (_module_name(path), ast.parse(path.read_text(encoding="utf-8")))
        for path in sorted(SRC.rglob("*.py"))
    ]


def _layer(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) < 2 or parts[1] not in MAY_IMPORT:
        return None  # the package root and __main__
    return parts[1]


def test_layers_import_only_what_is_below_them() -> None:
    wrong = []
    for module, tree in _sources():
        layer = _layer(module)
        for imported, line, typing_only in _imports(tree):
            top = imported.split(".")[0]
            where = f"{module}:{line} imports {imported}"
            if top == "confluent_kafka" and layer not in CONFLUENT_KAFKA_LAYERS:
                wrong.append(where)
            if top == "pyspark" and layer != "spark":
                wrong.append(where)
            if top != "mirrorlib" or layer is None or typing_only:
                continue
            target = imported.split(".")[1] if "." in imported else ""
            if target != layer and target not in MAY_IMPORT[layer]:
                wrong.append(where)
    assert wrong == []


def test_the_layer_check_sees_imports_in_functions_and_skips_type_checking_blocks() -> None:
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from mirrorlib.core.failover import FailoverPlan\n"
        "def f():\n    from confluent_kafka import Producer\n"
    )
    assert list(_imports(tree)) == [
        ("typing", 1, False),
        ("mirrorlib.core.failover", 3, True),
        ("confluent_kafka", 5, False),
    ]


def test_the_command_line_imports_the_demo_not_the_other_way() -> None:
    demo = dict(_sources())["mirrorlib.cli.demo"]
    assert not [m for m, _, _ in _imports(demo) if m == "mirrorlib.cli"]


# -- no import circle ---------------------------------------------------------------------------


def _graph(sources: list[tuple[str, ast.Module]]) -> dict[str, set[str]]:
    """Which modules of ``sources`` each one imports: ``import a.b``, ``from a import b`` (the
    submodule ``a.b`` when there is one, else ``a``), wherever the import stands."""
    known = {module for module, _ in sources}

    def resolve(name: str) -> str:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, set[str]] = {}
    for module, tree in sources:
        found = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found |= {resolve(alias.name) for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                found |= {resolve(f"{node.module}.{alias.name}") for alias in node.names}
        graph[module] = found - {"", module}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of ``graph`` (``[a, b, c, a]``: ``a`` imports ``b``, ..., ``c`` imports
    ``a``), or ``[]``."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        return list(reversed(exc.args[1]))  # graphlib lists it from importee to importer
    return []


def test_no_import_circle() -> None:
    """No circle among mirrorlib's modules: none imports a module that, directly or through
    others, imports it.

    Every import counts: at module level, under ``if TYPE_CHECKING:`` (a circle mypy and the
    reader still follow) and inside functions (a lazy import hides a circle, it does not remove
    it). A dependency runs one way: move the code both sides need below both.
    """
    assert _cycle(_graph(_sources())) == []


def test_the_circle_check_sees_type_checking_and_function_imports() -> None:
    sources = [
        ("mirrorlib.a", ast.parse("from mirrorlib import b\n")),
        ("mirrorlib.b", ast.parse("if TYPE_CHECKING:\n    from mirrorlib.c import C\n")),
        ("mirrorlib.c", ast.parse("def f():\n    import mirrorlib.a.x\n")),
        ("mirrorlib.d", ast.parse("import mirrorlib.a\n")),
    ]
    graph = _graph(sources)
    assert graph == {
        "mirrorlib.a": {"mirrorlib.b"},
        "mirrorlib.b": {"mirrorlib.c"},
        "mirrorlib.c": {"mirrorlib.a"},
        "mirrorlib.d": {"mirrorlib.a"},
    }
    cycle = _cycle(graph)
    assert len(cycle) == 4 and cycle[0] == cycle[-1]
    assert all(b in graph[a] for a, b in itertools.pairwise(cycle))


# -- one exception tree -------------------------------------------------------------------------


def _all_modules() -> Iterator[object]:
    for name in _modules("mirrorlib"):
        try:
            yield importlib.import_module(name)
        except ImportError as exc:  # an optional extra (pyspark, pyarrow) is not installed
            if (exc.name or "").split(".")[0] not in ("pyspark", "pyarrow", "prometheus_client"):
                raise


def test_every_exception_mirrorlib_defines_is_a_mirror_error_defined_in_errors() -> None:
    defined = {
        obj
        for module in _all_modules()
        for _, obj in inspect.getmembers(module, inspect.isclass)
        if issubclass(obj, BaseException) and obj.__module__.startswith("mirrorlib")
    }
    assert {c.__name__ for c in defined} >= {"DataLossError", "FailoverRefusedError"}
    assert [c for c in defined if not issubclass(c, MirrorError)] == []
    assert [c for c in defined if c.__module__ != "mirrorlib.errors"] == []


def test_no_exception_class_is_defined_outside_errors() -> None:
    """Also classes inside functions and modules of extras that are not installed."""
    wrong = [
        f"{module}: {node.name}"
        for module, tree in _sources()
        if module != "mirrorlib.errors"
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        and any(ast.unparse(b).endswith(("Error", "Exception")) for b in node.bases)
    ]
    assert wrong == []


def test_builtin_second_bases_keep_old_except_clauses_working() -> None:
    from mirrorlib import errors

    assert issubclass(errors.ConfigError, ValueError)
    assert issubclass(errors.CodecError, ValueError)
    assert issubclass(errors.DataLossError, RuntimeError)
    assert issubclass(errors.ClusterTimeoutError, TimeoutError)
    assert issubclass(errors.ClusterTimeoutError, errors.ClusterError)


def test_exceptions_stay_importable_where_they_were() -> None:
    from mirrorlib import errors
    from mirrorlib.kafka.copier import loop as copier
    from mirrorlib.kafka.ranges import executor as ranges
    from mirrorlib.runtime import failover

    assert copier.DataLossError is ranges.DataLossError is errors.DataLossError
    assert failover.FailoverRefusedError is errors.FailoverRefusedError


def _tree(text: str) -> set[str]:
    """The exception names drawn in the first fenced block of ``text``."""
    block = text.split("```", 2)[1]
    builtins = {"ValueError", "RuntimeError", "TimeoutError"}  # second bases, in parentheses
    return set(re.findall(r"\b[A-Z]\w*Error\b", block)) - builtins


def test_the_tree_is_drawn_whole_in_errors_and_in_the_docs() -> None:
    from mirrorlib import errors

    page = (Path(__file__).parent.parent / "docs" / "exceptions.md").read_text(encoding="utf-8")
    assert _tree(errors.__doc__ or "") == set(errors.__all__)
    assert _tree(page) == set(errors.__all__)


# -- the top of the package ----------------------------------------------------------------------

# Pinned: the package root, the program, the typing marker and the layers. No module at the top
# only re-exports another one (the re-export modules of earlier layouts are gone: each name has one
# path; docs/api.md says which paths are public).
TOP = {
    "__init__.py",
    "__main__.py",
    "py.typed",
    "errors.py",
    "cli",
    "core",
    "kafka",
    "runtime",
    "spark",
    "testing",
}


def test_the_top_of_the_package_holds_only_the_layers() -> None:
    assert {p.name for p in SRC.iterdir() if p.name != "__pycache__"} == TOP
    top = {m.name for m in pkgutil.iter_modules(mirrorlib.__path__, "mirrorlib.")}
    assert top == {f"mirrorlib.{layer}" for layer in MAY_IMPORT} | {"mirrorlib.__main__"}


def test_no_module_only_re_exports_another() -> None:
    """A module whose whole body (past its docstring) is ``from X import *`` is an alias path."""
    aliases = []
    for module, tree in _sources():
        body = [s for s in tree.body if not isinstance(s, ast.Expr)]  # past the docstring
        if body and all(isinstance(s, ast.ImportFrom) and s.names[0].name == "*" for s in body):
            aliases.append(module)
    assert aliases == []
