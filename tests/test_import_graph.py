"""The package's import graph: no cycle, and the production code never imports the test
tools (only the command line's check-store may). The graph is read off every module's
``import`` and ``from`` statements (those in functions and under ``if TYPE_CHECKING:``
included), an edge per package module named; string import paths (``stores.opening``'s
table, ``importlib``) are not edges."""

from __future__ import annotations

import ast
from pathlib import Path

import tool_execution_checkpoint

PACKAGE = Path(tool_execution_checkpoint.__file__).parent


def _modules(root: Path, package: str) -> dict[str, tuple[Path, bool]]:
    """Every module under ``root``: its dotted name -> (its file, whether a package)."""
    found: dict[str, tuple[Path, bool]] = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Each module of the package at ``root`` -> the package's modules it imports."""
    modules = _modules(root, package)

    def known(name: str) -> str | None:  # the module itself, or its closest parent
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, (path, is_package) in modules.items():
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    here = name if is_package else name.rpartition(".")[0]
                    for _ in range(node.level - 1):
                        here = here.rpartition(".")[0]
                    base = f"{here}.{base}" if base else here
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                    for alias in node.names
                ]
            else:
                continue
            edges.update(
                found
                for target in targets
                if target.split(".")[0] == package and (found := known(target)) is not None
            )
        graph[name] = edges - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (its modules in import order, the first repeated at the
    end), or None when it has none."""
    done: set[str] = set()
    path: list[str] = []
    on_path: set[str] = set()

    def visit(node: str) -> list[str] | None:
        path.append(node)
        on_path.add(node)
        for target in sorted(graph.get(node, ())):
            if target in on_path:
                return [*path[path.index(target) :], target]
            if target not in done and (cycle := visit(target)) is not None:
                return cycle
        path.pop()
        on_path.discard(node)
        done.add(node)
        return None

    for start in sorted(graph):
        if start not in done and (cycle := visit(start)) is not None:
            return cycle
    return None


def test_the_package_has_no_import_cycle() -> None:
    graph = import_graph(PACKAGE, "tool_execution_checkpoint")
    assert "tool_execution_checkpoint.stores.opening" in graph
    assert "tool_execution_checkpoint.testing.scratch" in graph
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or ())


def _in(name: str, package: str) -> bool:
    return name == package or name.startswith(f"{package}.")


def imports_of_testing(graph: dict[str, set[str]], package: str) -> list[str]:
    """Each ``module -> target`` edge by which a module outside ``package.testing`` (but
    the command line's, ``package.cli``) imports ``package.testing`` or a module in it."""
    testing = f"{package}.testing"

    def inside(name: str) -> bool:
        return _in(name, testing)

    return sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if not inside(module) and not _in(module, f"{package}.cli")
        for target in targets
        if inside(target)
    )


def test_nothing_but_the_command_line_imports_the_test_tools() -> None:
    graph = import_graph(PACKAGE, "tool_execution_checkpoint")
    assert imports_of_testing(graph, "tool_execution_checkpoint") == []
    assert (
        "tool_execution_checkpoint.stores.opening"
        in graph["tool_execution_checkpoint.testing.scratch"]
    )


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, "utf-8")
    return root


def test_the_checker_finds_a_cycle_through_a_type_checking_import(tmp_path: Path) -> None:
    root = _write(
        tmp_path / "fake",
        {
            "__init__.py": "",
            "stores/__init__.py": "from .opening import open_store\n",
            "stores/opening.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from .scratch import ScratchSpace\n"
            ),
            "stores/scratch.py": "from .opening import open_store\n",
            "core.py": "import fake.stores.opening\nfrom . import stores\n",
        },
    )
    graph = import_graph(root, "fake")
    assert graph["fake.stores.opening"] == {"fake.stores.scratch"}
    assert graph["fake.core"] == {"fake.stores.opening", "fake.stores"}
    cycle = ["fake.stores.opening", "fake.stores.scratch", "fake.stores.opening"]
    assert find_cycle(graph) == cycle


def test_the_checker_finds_a_cycle_through_a_function_s_import_and_a_parent(
    tmp_path: Path,
) -> None:
    root = _write(
        tmp_path / "fake",
        {
            "__init__.py": "from .a import run\n",
            "a.py": "def run():\n    from .b.c import x\n",
            "b/__init__.py": "",
            "b/c.py": "from .. import run\n",
        },
    )
    graph = import_graph(root, "fake")
    assert graph["fake.b.c"] == {"fake"}
    assert find_cycle(graph) == ["fake", "fake.a", "fake.b.c", "fake"]


def test_the_checker_passes_a_package_without_a_cycle(tmp_path: Path) -> None:
    root = _write(
        tmp_path / "fake",
        {
            "__init__.py": "from .a import run\n",
            "a.py": "import os\nfrom .b import helper\n",
            "b.py": "import json\n",
            "testing/__init__.py": "from ..a import run\n",
        },
    )
    graph = import_graph(root, "fake")
    assert graph == {
        "fake": {"fake.a"},
        "fake.a": {"fake.b"},
        "fake.b": set(),
        "fake.testing": {"fake.a"},
    }
    assert find_cycle(graph) is None


def test_the_checker_finds_a_store_that_imports_the_test_tools(tmp_path: Path) -> None:
    root = _write(
        tmp_path / "fake",
        {
            "__init__.py": "",
            "cli.py": "from .testing import scratch\n",
            "stores/__init__.py": "",
            "stores/opening.py": "def scratch():\n    from ..testing.scratch import space\n",
            "testing/__init__.py": "from ..stores import opening\n",
            "testing/scratch.py": "from . import opening\n",
        },
    )
    graph = import_graph(root, "fake")
    assert imports_of_testing(graph, "fake") == ["fake.stores.opening -> fake.testing.scratch"]
