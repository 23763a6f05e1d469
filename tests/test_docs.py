"""Every code block of the README and of docs/ runs, or is an exception listed here with
its reason; the site's pages are all in its navigation; the state diagram is the table's.

A fenced block's language says what it is: ``python`` is a script, run in an empty
directory of its own; ``text`` is output or configuration shown, not code; any other
language (``py``, ``sh``) is code that is not run here, and must be in ``NOT_RUN`` with the
reason. A block without a language, and an indented code block, are refused: they would
be code nobody runs.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import markdown
import pytest

from tool_execution_checkpoint.diagram import render_dot, source_digest, svg_source_digest
from tool_execution_checkpoint.rendering import DIAGRAM, stale_diagram
from tool_execution_checkpoint.table import TABLE

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
SHOWN = {"text"}

# (page, the block's first line) -> why it is not run.
NOT_RUN = {
    (
        "README.md",
        "make demo   # on SQLite: the tool runs, the POST fails, the host restarts,"
        " recovery delivers",
    ): "the quick start's commands: tests/test_readme.py checks they are"
    " make targets, and CI runs `make test` itself",
    ("README.md", "pip install tool-execution-checkpoint      # run time: icontract only"): (
        "installs from the package index (network); the tests run from this checkout"
    ),
    (
        "README.md",
        "make test     # ruff, mypy --strict, pytest and the documentation site, built strict",
    ): "the development targets: running them here would run the suite in"
    " the suite (CI runs `make test`; tests/test_readme.py checks each is a make target)",
    (
        "docs/telemetry.md",
        "pip install 'tool-execution-checkpoint[otel]' opentelemetry-sdk"
        " opentelemetry-exporter-otlp",
    ): "installs from the package index (network); the tests run with the dev extra,"
    " which holds the otel extra's API and the SDK",
    (
        "docs/stores/postgres.md",
        "from tool_execution_checkpoint.stores.postgres import AsyncPostgresStore, PostgresStore",
    ): "needs a PostgreSQL server at db.internal;"
    " tests/test_postgres_store.py opens the same URLs on a throwaway server",
    (
        "docs/stores/redis.md",
        "from tool_execution_checkpoint.stores.redis import AsyncRedisStore, RedisStore",
    ): "needs a Redis server at redis.internal;"
    " tests/test_redis_store.py opens the same URLs on a throwaway server",
    (
        "docs/stores/redis.md",
        'store = RedisStore.from_url("redis+cluster://:PASSWORD@10.0.0.1:7000", prefix="tec:")',
    ): "needs a Redis Cluster at 10.0.0.1; tests/test_redis_cluster.py"
    " starts one and opens it by URL",
}


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def blocks() -> list[tuple[str, int, str, str]]:
    """Every fenced block: (page, its number on the page, language, body)."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for number, match in enumerate(FENCE.finditer(text)):
            found.append((_name(page), number, match.group(1), match.group(2)))
    return found


BLOCKS = blocks()
PYTHON = [(page, number, body) for page, number, language, body in BLOCKS if language == "python"]


def _first_line(body: str) -> str:
    return body.split("\n", 1)[0]


def test_there_are_python_blocks_in_the_readme_and_in_the_docs() -> None:
    pages = {page for page, _, _ in PYTHON}
    assert "README.md" in pages
    assert len(pages) >= 10, sorted(pages)


@pytest.mark.parametrize(
    ("page", "number", "body"), PYTHON, ids=[f"{page}:{number}" for page, number, _ in PYTHON]
)
def test_python_block_runs(page: str, number: int, body: str, tmp_path: Path) -> None:
    script = tmp_path / f"block_{number}.py"
    script.write_text(body, encoding="utf-8")
    run = subprocess.run(
        [sys.executable, str(script)],
        check=False,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=180,
    )
    assert run.returncode == 0, f"{page}, block {number}:\n{run.stderr}"


def test_every_block_not_run_is_a_listed_exception() -> None:
    unlisted = [
        (page, language, _first_line(body))
        for page, _, language, body in BLOCKS
        if language not in {"python", *SHOWN} and (page, _first_line(body)) not in NOT_RUN
    ]
    assert unlisted == [], "run these blocks (```python) or list them in NOT_RUN with a reason"
    present = {(page, _first_line(body)) for page, _, _, body in BLOCKS}
    assert set(NOT_RUN) <= present, sorted(set(NOT_RUN) - present)


def test_no_block_lacks_a_language() -> None:
    bare = [(page, _first_line(body)) for page, _, language, body in BLOCKS if not language]
    assert bare == []


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_no_indented_code_block(page: Path) -> None:
    """Indented code would be code no test runs: fence it with a language instead."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    assert "<pre>" not in markdown.markdown(text, extensions=["tables"]), _name(page)


def test_every_page_is_in_the_navigation() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    listed = set(re.findall(r":\s+(\S+\.md)$", config, flags=re.MULTILINE))
    pages = {_name(page).removeprefix("docs/") for page in PAGES[1:]}
    assert pages == listed


def test_the_site_uses_nothing_from_the_network() -> None:
    """No web fonts, no scripts or styles from elsewhere, no mermaid (rendered by a
    script from a CDN): the site builds and reads offline."""
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert re.search(r"^\s+font: false$", config, flags=re.MULTILINE)
    assert "extra_javascript" not in config
    assert "://" not in config.split("extra_css:", 1)[1].split("\n\n", 1)[0]
    assert not [page for page, _, language, _ in BLOCKS if language == "mermaid"]


def test_the_state_diagram_is_drawn_from_the_table() -> None:
    svg = (ROOT / DIAGRAM).read_text(encoding="utf-8")
    assert svg_source_digest(svg) == source_digest(render_dot())
    assert not stale_diagram(ROOT)
    for status in ("ready", "executing", "uncertain", "delivered", "prune_result"):
        assert f">{status}</text>" in svg, status


def test_the_diagram_has_one_arrow_per_source_of_each_transition_and_step() -> None:
    edges = re.findall(r'^  (\S+) -> (\S+) \[label="([^"]+)"', render_dot(), re.MULTILINE)
    wanted = {("start", '"ready"', "create_checkpoint")}
    for rule in TABLE.transitions.values():
        wanted |= {(f'"{source}"', f'"{rule.target}"', rule.name) for source in rule.sources}
    for step in TABLE.composed.values():
        sources = ["start"] if step.creates else [f'"{source}"' for source in step.sources]
        wanted |= {(source, f'"{step.target}"', step.name) for source in sources}
    assert sorted((tail, head, label.replace("\\n", "")) for tail, head, label in edges) == sorted(
        wanted
    )


def test_a_picture_drawn_from_other_text_is_stale(tmp_path: Path) -> None:
    svg = (ROOT / DIAGRAM).read_text(encoding="utf-8")
    other = source_digest(render_dot() + "// another table\n")
    (tmp_path / DIAGRAM).parent.mkdir(parents=True)
    (tmp_path / DIAGRAM).write_text(svg.replace(source_digest(render_dot()), other))
    assert stale_diagram(tmp_path)
    (tmp_path / DIAGRAM).unlink()
    assert stale_diagram(tmp_path)
