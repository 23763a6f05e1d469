"""One error taxonomy across the stores.

Every error class a store module (or package) defines is its store's base class or a subclass of it
in exactly one category (not applied, unavailable, configuration, outcome unknown), with
the store's base before the category in its method resolution order; and no store raises
its bare base class, a bare category or a plain StoreError. The checker is shown catching
a module that breaks each rule, and the categories are checked on real failures.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import socket
import types
from collections.abc import Sequence
from pathlib import Path

import psycopg
import pytest

from tool_execution_checkpoint import (
    OutcomeUnknownError,
    SQLiteConfigurationError,
    SQLiteNotAppliedError,
    SQLiteStore,
    StoreConfigurationError,
    StoreError,
    StoreNotAppliedError,
    StoreUnavailableError,
    create_checkpoint,
)
from tool_execution_checkpoint.records import Binding
from tool_execution_checkpoint.stores import postgres, sqlite
from tool_execution_checkpoint.stores import redis as redis_store
from tool_execution_checkpoint.stores.postgres import errors as postgres_errors
from tool_execution_checkpoint.stores.redis import RedisStore, RedisUnavailableError
from tool_execution_checkpoint.testing import faults

CATEGORIES = (
    StoreUnavailableError,
    StoreConfigurationError,
    StoreNotAppliedError,
    OutcomeUnknownError,
)
"""Most specific first: a class's category is the first of these it subclasses."""

GENERIC = {StoreError, *CATEGORIES}

STORE_MODULES = (sqlite, redis_store, postgres)


def category(kind: type[StoreError]) -> type[StoreError] | None:
    return next((each for each in CATEGORIES if issubclass(kind, each)), None)


def parts(module: types.ModuleType) -> list[types.ModuleType]:
    """``module``, and each of its modules when it is a package."""
    if not hasattr(module, "__path__"):
        return [module]
    prefix = f"{module.__name__}."
    names = sorted(info.name for info in pkgutil.iter_modules(module.__path__, prefix))
    return [module, *(importlib.import_module(name) for name in names)]


def sources(module: types.ModuleType) -> list[tuple[types.ModuleType, str]]:
    """Each of ``module``'s parts with its text."""
    return [(part, inspect.getsource(part)) for part in parts(module)]


def error_classes(module: types.ModuleType) -> list[type[StoreError]]:
    return [
        value
        for part in parts(module)
        for value in vars(part).values()
        if isinstance(value, type)
        and issubclass(value, StoreError)
        and value.__module__ == part.__name__
    ]


def raised_names(source: str) -> set[str]:
    """The names called in ``source`` (``Name(...)``): every error a module raises is
    built by calling its class by name."""
    return {
        node.func.id
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }


def taxonomy_problems(
    module: types.ModuleType, texts: Sequence[tuple[types.ModuleType, str]]
) -> list[str]:
    """What breaks the taxonomy in ``module``, whose parts have the ``texts``."""
    classes = error_classes(module)
    bases = [kind for kind in classes if kind.__bases__ == (StoreError,)]
    if len(bases) != 1:
        return [f"{module.__name__}: {len(bases)} classes subclass StoreError alone, not 1"]
    (base,) = bases
    problems = []
    for kind in classes:
        if kind is base:
            continue
        found = category(kind)
        if not issubclass(kind, base):
            problems.append(f"{kind.__name__} is not a {base.__name__}")
        if found is None:
            problems.append(f"{kind.__name__} is in no category")
            continue
        if issubclass(kind, OutcomeUnknownError) and issubclass(kind, StoreNotAppliedError):
            problems.append(f"{kind.__name__} is both not applied and outcome unknown")
        if issubclass(kind, StoreUnavailableError) and issubclass(kind, StoreConfigurationError):
            problems.append(f"{kind.__name__} is both unavailable and configuration")
        if issubclass(kind, base) and kind.__mro__.index(base) > kind.__mro__.index(found):
            problems.append(f"{kind.__name__} lists its category before {base.__name__}")
    for part, source in texts:
        namespace = vars(part)
        for name in sorted(raised_names(source)):
            value = namespace.get(name)
            if value is base or value in GENERIC:
                problems.append(f"{part.__name__} raises a bare {name}")
    return problems


@pytest.mark.parametrize("module", STORE_MODULES, ids=lambda module: module.__name__)
def test_every_store_error_is_in_one_category_after_its_store_base(
    module: types.ModuleType,
) -> None:
    assert taxonomy_problems(module, sources(module)) == []
    assert len(error_classes(module)) >= 4


def test_the_checker_reads_each_module_of_a_package() -> None:
    package = types.ModuleType("broken_package")
    namespace = vars(package)
    namespace.update(StoreError=StoreError, StoreUnavailableError=StoreUnavailableError)
    exec("class A(StoreError): pass\nclass B(A, StoreUnavailableError): pass\n", namespace)
    part = types.ModuleType("broken_package.driver")
    vars(part).update(A=package.A)
    source = "def f():\n    raise A('x')\n"
    assert taxonomy_problems(package, [(package, "")]) == []
    assert taxonomy_problems(package, [(package, ""), (part, source)]) == [
        "broken_package.driver raises a bare A"
    ]


def test_the_injected_faults_of_the_harness_are_in_categories() -> None:
    assert category(faults.InjectedWriteError) is StoreNotAppliedError
    assert category(faults.InjectedAmbiguousWriteError) is OutcomeUnknownError
    assert category(faults.InjectedReadError) is StoreUnavailableError


def test_each_store_has_each_category() -> None:
    for module in STORE_MODULES:
        found = {category(kind) for kind in error_classes(module)}
        assert found >= set(CATEGORIES), module.__name__


BROKEN = {
    "two bases": "class A(StoreError): pass\nclass B(StoreError): pass\n",
    "no category": "class A(StoreError): pass\nclass B(A): pass\n",
    "category first": ("class A(StoreError): pass\nclass B(StoreUnavailableError, A): pass\n"),
    "both known and unknown": (
        "class A(StoreError): pass\nclass B(A, StoreNotAppliedError, OutcomeUnknownError): pass\n"
    ),
    "raises its base": (
        "class A(StoreError): pass\nclass B(A, StoreUnavailableError): pass\n"
        "def f():\n    raise A('x')\n"
    ),
    "raises a bare category": (
        "class A(StoreError): pass\nclass B(A, StoreUnavailableError): pass\n"
        "def f():\n    raise OutcomeUnknownError('x')\n"
    ),
}


CAUGHT = {
    "two bases": "2 classes subclass StoreError alone",
    "no category": "B is in no category",
    "category first": "B lists its category before A",
    "both known and unknown": "B is both not applied and outcome unknown",
    "raises its base": "raises a bare A",
    "raises a bare category": "raises a bare OutcomeUnknownError",
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_the_checker_catches_a_module_that_breaks_the_taxonomy(name: str) -> None:
    module = types.ModuleType(f"broken_{name.replace(' ', '_')}")
    namespace = vars(module)
    namespace.update(
        StoreError=StoreError,
        StoreNotAppliedError=StoreNotAppliedError,
        StoreUnavailableError=StoreUnavailableError,
        OutcomeUnknownError=OutcomeUnknownError,
    )
    namespace["__name__"] = module.__name__
    exec(compile(BROKEN[name], module.__name__, "exec"), namespace)
    problems = taxonomy_problems(module, [(module, BROKEN[name])])
    assert any(CAUGHT[name] in problem for problem in problems), problems


def test_sqlite_failures_are_in_their_categories(tmp_path: Path) -> None:
    binding = Binding("errors", "call-1", "tool", "1", "sha256:0")
    record = create_checkpoint(binding, created_at="2026-01-01T00:00:00Z")
    with pytest.raises(SQLiteConfigurationError) as missing:
        SQLiteStore(tmp_path / "no-such-directory" / "checkpoints.db")
    assert isinstance(missing.value, StoreConfigurationError)
    store = SQLiteStore(tmp_path / "checkpoints.db")
    store.close()
    with pytest.raises(SQLiteNotAppliedError) as closed:
        store.create_if_absent("k", record)
    assert category(type(closed.value)) is StoreNotAppliedError


def test_an_unreachable_redis_is_unavailable_and_a_bad_url_is_configuration() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    store = RedisStore.from_url(f"redis://127.0.0.1:{port}/0")
    with pytest.raises(RedisUnavailableError) as down:
        store.get("k")
    assert category(type(down.value)) is StoreUnavailableError
    store.close()
    with pytest.raises(StoreConfigurationError):
        RedisStore.from_url("http://nowhere/0")


def test_postgres_failures_map_to_categories_by_sqlstate() -> None:
    """The mapping of a failed statement, checked on psycopg's own error classes (a
    refusal with an ERROR needs a server's answer: the PostgreSQL tests see it)."""
    lost = psycopg.OperationalError("the connection was lost")
    assert type(postgres_errors.operation_failure(lost, "create", write=True)) is (
        postgres.PostgresOutcomeUnknownError
    )
    assert category(type(postgres_errors.operation_failure(lost, "get", write=False))) is (
        StoreUnavailableError
    )
    denied = psycopg.errors.InsufficientPrivilege("denied")
    assert category(type(postgres_errors.operation_failure(denied, "get", write=False))) is (
        StoreConfigurationError
    )
