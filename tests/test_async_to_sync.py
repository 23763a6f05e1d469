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
