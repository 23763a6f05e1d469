"""tools/async_to_sync.py: what it makes of a written asyncio module, and that every generated
module in the repository is current."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("async_to_sync", ROOT / "tools/async_to_sync.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["async_to_sync"] = module
    spec.loader.exec_module(module)
    return module


script = _load()


def _sync(text: str) -> str:
    body = script.drop_async_branches(textwrap.dedent(text))
    return str(script.rename(script.drop_async_only_lines(body)))


def test_async_and_await_are_dropped_and_the_spacing_kept() -> None:
    made = _sync(
        """
        async def fetch(pool):  # an aclose here is a word too
            async with pool.connection() as connection:
                async for row in connection.rows():
                    await  connection.send(row)
            return [await pool.aclose()]
        """
    )
    assert made == textwrap.dedent(
        """
        def fetch(pool):  # an close here is a word too
            with pool.connection() as connection:
                for row in connection.rows():
                    connection.send(row)
            return [pool.close()]
        """
    )


def test_names_dotted_names_strings_and_comments_are_renamed_as_whole_words() -> None:
    made = _sync(
        '''
        async def __aenter__(self):
            """Calls aclose, not aclosed; asyncio.sleep is time's."""
            await asyncio.sleep(0.1)
            self.aclosed = asyncio.sleep_forever
            return x.asyncio.sleep
        '''
    )
    assert "def __enter__(self):" in made
    assert '"""Calls close, not aclosed; time.sleep is time\'s."""' in made
    assert "    time.sleep(0.1)\n" in made
    assert "self.aclosed = asyncio.sleep_forever" in made
    assert "return x.asyncio.sleep" in made


def test_an_async_branch_becomes_its_else_body() -> None:
    made = _sync(
        """
        def stop(self):
            if True:  # ASYNC
                await self.pool.aclose()

                self.gone = True
            else:
                self.pool.close()
                if True:  # ASYNC
                    nested()
                else:
                    inner()
            after()
        """
    )
    assert made == textwrap.dedent(
        """
        def stop(self):
            self.pool.close()
            inner()
            after()
        """
    )


def test_an_async_branch_without_else_and_async_only_lines_go() -> None:
    made = _sync(
        """
        import asyncio  # ASYNC-ONLY
        import time

        if True:  # ASYNC
            setup()
        tail()
        """
    )
    assert made == "\nimport time\n\ntail()\n"


def test_a_branch_with_no_body_is_refused() -> None:
    with pytest.raises(script.GenerationError, match="line 1"):
        script.drop_async_branches("if True:  # ASYNC\nx = 1\n")


def test_generate_heads_and_formats_the_module() -> None:
    made = script.generate(
        "src/pkg/thing_async.py",
        "import asyncio  # ASYNC-ONLY\nimport time\n\n\n"
        "async def f():\n    await  asyncio.sleep( 1 )\n",
        Path("src/pkg/thing.py"),
        ROOT,
    )
    assert made.startswith(script.GENERATED_MARK + "src/pkg/thing_async.py")
    assert made.endswith("import time\n\n\ndef f():\n    time.sleep(1)\n")


def test_check_names_stale_missing_and_unlisted_generated_modules(tmp_path: Path) -> None:
    package = tmp_path / script.PACKAGE
    package.mkdir(parents=True)
    (package / "a_async.py").write_text("async def f():\n    await g()\n")
    (package / "b_async.py").write_text("async def h():\n    pass\n")
    pairs = [
        (str(script.PACKAGE / "a_async.py"), str(script.PACKAGE / "a.py")),
        (str(script.PACKAGE / "b_async.py"), str(script.PACKAGE / "b.py")),
    ]
    missing = script.run(pairs, root=tmp_path, check=True)
    assert [problem.split(" is ")[1][:7] for problem in missing] == ["missing", "missing"]
    assert script.run(pairs, root=tmp_path) == []
    assert (package / "a.py").read_text().endswith("def f():\n    g()\n")
    assert script.run(pairs, root=tmp_path, check=True) == []

    (package / "a_async.py").write_text("async def f():\n    await g(1)\n")
    (package / "orphan.py").write_text(script.HEADER.format(source="gone_async.py") + "x = 1\n")
    problems = script.run(pairs, root=tmp_path, check=True)
    assert len(problems) == 2
    assert "a.py is stale" in problems[0]
    assert "orphan.py is headed as generated" in problems[1]


def test_every_generated_module_in_the_repository_is_current() -> None:
    assert script.run(check=True) == []
    for source, target in script.PAIRS:
        assert (ROOT / source).exists()
        assert (ROOT / target).read_text(encoding="utf-8").startswith(script.GENERATED_MARK)


def _generate(text: str) -> str:
    made = script.generate(
        "src/pkg/thing_async.py", textwrap.dedent(text).lstrip("\n"), Path("src/pkg/thing.py"), ROOT
    )
    return str(made).split("\n", 3)[3]  # without the header


def test_an_async_branch_marker_may_carry_free_text() -> None:
    made = _generate(
        """
        import asyncio  # ASYNC-ONLY: its sleeps
        import time


        async def nap(seconds):
            if True:  # ASYNC: the loop must not block
                await asyncio.sleep(seconds)
            else:
                time.sleep(seconds)
        """
    )
    assert made == "import time\n\n\ndef nap(seconds):\n    time.sleep(seconds)\n"


@pytest.mark.parametrize(
    "comment",
    ["#ASYNC", "# ASYNCHRONOUS", "# ASYNC_ONLY", "#  ASYNC", "# an ASYNC branch", "#ASYNC-ONLY"],
)
def test_a_comment_holding_async_that_is_no_marker_is_refused(comment: str) -> None:
    text = f"x = 1\nif True:  {comment}\n    a()\nelse:\n    b()\n"
    with pytest.raises(script.GenerationError, match="line 2"):
        script.drop_async_branches(text)
    with pytest.raises(script.GenerationError, match="line 2"):
        _generate(text)


def test_a_branch_marker_on_a_line_that_is_not_if_true_is_refused() -> None:
    with pytest.raises(script.GenerationError, match="line 1"):
        _generate("if ready:  # ASYNC\n    a()\nelse:\n    b()\n")


def test_an_if_true_left_in_the_output_is_refused() -> None:
    with pytest.raises(script.GenerationError, match="if True"):
        _generate("if True:  # async\n    a()\nelse:\n    b()\n")


def test_crlf_line_endings_are_read_as_newlines() -> None:
    text = "import asyncio  # ASYNC-ONLY\r\nif True:  # ASYNC\r\n    a()\r\nelse:\r\n    b()\r\n"
    assert _generate(text) == "b()\n"


def test_markers_inside_strings_are_text_not_markers() -> None:
    text = '''
        def f():
            """The convention, shown:

            if True:  # ASYNC
                a()
            else:
                b()
            import asyncio  # ASYNC-ONLY
            """
        '''
    assert _sync(text) == textwrap.dedent(text)


@pytest.mark.parametrize(
    "text",
    [
        'async def f(x):\n    return f"{await x}"\n',  # 3.11 keeps the await in the string
        "def f(store, store_async):\n    return store\n",  # the rename makes two stores
    ],
)
def test_an_output_that_does_not_compile_is_refused(text: str) -> None:
    with pytest.raises(script.GenerationError):
        _generate(text)


@pytest.mark.parametrize(
    "text", ['f"{c.aclose} AsyncRedisStore"', 'f"{c.aclose}"', 'f"{await x}"', 'f"to await {x}"']
)
def test_a_rename_or_await_inside_an_f_string_is_refused(text: str) -> None:
    """3.11 reads an f-string as one string, 3.12 as code and text: the two would rename
    it differently."""
    with pytest.raises(script.GenerationError, match="f-string"):
        script.rename(f"x = {text}\n")
    assert script.rename('x = f"{c.closed} RedisStore"\n') == 'x = f"{c.closed} RedisStore"\n'


@pytest.mark.parametrize(
    ("text", "left"),
    [
        ("import asyncio\n\n\nasync def f(g):\n    await asyncio.shield(g())\n", "asyncio"),
        ("from collections.abc import Awaitable\n\nx: Awaitable[int]\n", "Awaitable"),
        ("from typing import Coroutine\n", "Coroutine"),
        ("async def f(it):\n    return await anext(it)\n", "anext"),
        ("def f(it):\n    return aiter(it)\n", "aiter"),
        ("try:\n    pass\nexcept StopAsyncIteration:\n    pass\n", "StopAsyncIteration"),
        ("from x.asyncio import y\n", "asyncio"),
    ],
)
def test_async_only_names_left_in_the_output_are_refused(text: str, left: str) -> None:
    with pytest.raises(script.GenerationError, match=left):
        _generate(text)


@pytest.mark.parametrize(
    ("text", "node"),
    [
        ("async def f():\n    pass\n", "AsyncFunctionDef"),
        ("async def f(g):\n    await g()\n", "Await"),
        ("async def f(g):\n    async with g():\n        pass\n", "AsyncWith"),
        ("async def f(g):\n    async for x in g():\n        pass\n", "AsyncFor"),
        ("async def f(g):\n    return [x async for x in g()]\n", "async comprehension"),
    ],
)
def test_async_syntax_left_in_the_output_is_refused(text: str, node: str) -> None:
    with pytest.raises(script.GenerationError, match=node):
        script.check_sync(text, Path("src/pkg/thing.py"))
