"""Generate the synchronous twin of each written asyncio module, or check that it is current.

The I/O half is written once, for asyncio; its sync twin is this script's output and is
never edited by hand. ``PAIRS`` lists each written module and the module generated from it;
``RENAMES`` maps the names that differ. A generated module is:

- the written module with ``async`` dropped before ``def``, ``with`` and ``for``, and
  ``await`` dropped;
- each name in ``RENAMES`` renamed, as a token in the code and as a whole word in strings and
  comments (a dotted key such as ``asyncio.sleep`` matches the dotted name);
- each ``if True:  # ASYNC`` block replaced by the body of its ``else:`` (or nothing), and
  each line that ends with ``# ASYNC-ONLY`` dropped;
- headed by ``HEADER`` and formatted by ruff (imports sorted, then ``ruff format``).

Usage: ``python tools/async_to_sync.py`` writes every generated module;
``python tools/async_to_sync.py --check`` writes nothing and exits 1 naming each generated
module that is stale, missing, or headed as generated but not listed in ``PAIRS``.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import shutil
import subprocess
import sys
import tokenize
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = Path("src/tool_execution_checkpoint")

PAIRS: tuple[tuple[str, str], ...] = (
    (
        "src/tool_execution_checkpoint/runner/drive_async.py",
        "src/tool_execution_checkpoint/runner/drive.py",
    ),
    (
        "src/tool_execution_checkpoint/guard_calls_async.py",
        "src/tool_execution_checkpoint/guard_calls.py",
    ),
    (
        "src/tool_execution_checkpoint/adapters/langgraph_calls_async.py",
        "src/tool_execution_checkpoint/adapters/langgraph_calls.py",
    ),
    (
        "src/tool_execution_checkpoint/adapters/mcp_calls_async.py",
        "src/tool_execution_checkpoint/adapters/mcp_calls.py",
    ),
    (
        "src/tool_execution_checkpoint/adapters/openai_agents_calls_async.py",
        "src/tool_execution_checkpoint/adapters/openai_agents_calls.py",
    ),
    (
        "src/tool_execution_checkpoint/stores/redis/clients_async.py",
        "src/tool_execution_checkpoint/stores/redis/clients.py",
    ),
    (
        "src/tool_execution_checkpoint/stores/redis/store_async.py",
        "src/tool_execution_checkpoint/stores/redis/store.py",
    ),
    (
        "src/tool_execution_checkpoint/stores/postgres/store_async.py",
        "src/tool_execution_checkpoint/stores/postgres/store.py",
    ),
)
"""(written asyncio module, generated sync module), relative to the repository's root."""

RENAMES: Mapping[str, str] = {
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "aclose": "close",
    "AsyncIterator": "Iterator",
    "AsyncIterable": "Iterable",
    "AsyncGenerator": "Generator",
    "asynccontextmanager": "contextmanager",
    "asyncio.sleep": "time.sleep",
    # the runner's drivers
    "run_once_async": "run_once",
    "_AwaitedStore": "_Store",
    "_AwaitedTool": "_Tool",
    "_AwaitedSend": "_Send",
    # the guard's calls
    "guard_calls_async": "guard_calls",
    "AsyncGuardCalls": "GuardCalls",
    "AsyncTool": "Tool",
    "answered_async": "answered",
    "call_async": "call",
    "guarded_function_async": "guarded_function",
    "run_tool_async": "run_tool",
    # the adapters' calls
    "AsyncExecute": "Execute",
    "AsyncToolCallInterceptor": "ToolCallInterceptor",
    "awrap_tool_call": "wrap_tool_call",
    "guarded_tool_async": "guarded_tool",
    "in_run_async": "in_run",
    # the Redis store
    "AsyncRedisStore": "RedisStore",
    "redis.asyncio": "redis",
    "clients_async": "clients",
    "store_async": "store",
    # the PostgreSQL store
    "AsyncPostgresStore": "PostgresStore",
    "open_async_store": "open_store",
    "AsyncConnectionPool": "ConnectionPool",
    "AsyncConnection": "Connection",
}
"""Each name that differs between the written module and its sync twin."""

HEADER = (
    "# Generated from {source}\n"
    "# by tools/async_to_sync.py: do not edit. Edit that module and run\n"
    "# `python tools/async_to_sync.py` (make lint checks it).\n"
)
GENERATED_MARK = "# Generated from "
"""How a generated module's first line starts (the module-size test exempts it)."""

_BRANCH = re.compile(r"^(?P<indent>[ ]*)if True:[ ]*# ASYNC[ ]*$")
_ASYNC_ONLY = re.compile(r"#[ ]*ASYNC-ONLY[ ]*$")
_DROPPED_BEFORE = frozenset({"def", "with", "for"})


class GenerationError(Exception):
    """A written module this script cannot turn into its sync twin (the message says where)."""


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _block(lines: Sequence[str], start: int, indent: int) -> int:
    """The index just past the block whose lines from ``start`` are indented beyond ``indent``
    (blank lines inside it included)."""
    end = start
    for index in range(start, len(lines)):
        if lines[index].strip() and _indent(lines[index]) <= indent:
            break
        end = index + 1
    return end


def _dedented(lines: Sequence[str], by: int, where: int) -> list[str]:
    kept = []
    for offset, line in enumerate(lines):
        if line.strip() and not line.startswith(" " * by):
            raise GenerationError(f"line {where + offset + 1}: an else body indented too little")
        kept.append(line[by:] if line.strip() else line)
    return kept


def drop_async_branches(text: str) -> str:
    """Replace each ``if True:  # ASYNC`` block by its ``else:`` body, one level out."""
    lines = text.splitlines(keepends=True)
    index = 0
    while index < len(lines):
        found = _BRANCH.match(lines[index].rstrip("\n"))
        if found is None:
            index += 1
            continue
        indent = len(found["indent"])
        body_end = _block(lines, index + 1, indent)
        if body_end == index + 1:
            raise GenerationError(f"line {index + 1}: an ASYNC branch with no body")
        else_body: list[str] = []
        end = body_end
        if body_end < len(lines) and lines[body_end].rstrip() == " " * indent + "else:":
            end = _block(lines, body_end + 1, indent)
            body = lines[body_end + 1 : end]
            step = _indent(next(line for line in body if line.strip())) - indent
            else_body = _dedented(body, step, body_end + 1)
        lines[index:end] = else_body
    return "".join(lines)


def drop_async_only_lines(text: str) -> str:
    """Drop each line that ends with ``# ASYNC-ONLY``."""
    lines = text.splitlines(keepends=True)
    return "".join(line for line in lines if not _ASYNC_ONLY.search(line.rstrip("\n")))


def _offsets(text: str) -> list[int]:
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def _word_pattern(renames: Mapping[str, str]) -> re.Pattern[str] | None:
    if not renames:
        return None
    keys = sorted(renames, key=len, reverse=True)
    return re.compile(r"(?<![\w.])(?:" + "|".join(re.escape(key) for key in keys) + r")(?!\w)")


def _tokens(text: str) -> list[tokenize.TokenInfo]:
    try:
        return list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError) as error:
        raise GenerationError(f"cannot tokenize: {error}") from None


def _dotted_at(tokens: Sequence[tokenize.TokenInfo], index: int, parts: int) -> str:
    """The dotted name of ``parts`` names starting at ``index``, or "" if there is none."""
    names = []
    for offset in range(parts * 2 - 1):
        if index + offset >= len(tokens):
            return ""
        token = tokens[index + offset]
        wanted = tokenize.NAME if offset % 2 == 0 else tokenize.OP
        if token.type != wanted or (wanted == tokenize.OP and token.string != "."):
            return ""
        names.append(token.string)
    return "".join(names)


def rename(text: str, renames: Mapping[str, str] = RENAMES) -> str:
    """Drop ``async`` and ``await`` and apply ``renames``, keeping every other character."""
    tokens = _tokens(text)
    starts = _offsets(text)
    words = _word_pattern(renames)
    dotted = sorted(
        ((key.count(".") + 1, key) for key in renames if "." in key),
        reverse=True,
    )
    out: list[str] = []
    cursor = 0
    skip_gap = False
    index = 0
    while index < len(tokens):
        token = tokens[index]
        begin = starts[token.start[0] - 1] + token.start[1]
        end = starts[token.end[0] - 1] + token.end[1]
        if not skip_gap:
            out.append(text[cursor:begin])
        skip_gap = False
        cursor = end
        if token.type == tokenize.NAME:
            following = tokens[index + 1] if index + 1 < len(tokens) else None
            if token.string == "await" or (
                token.string == "async"
                and following is not None
                and following.string in _DROPPED_BEFORE
            ):
                skip_gap = True
                index += 1
                continue
            after_dot = index > 0 and tokens[index - 1].string == "."
            for parts, key in dotted:
                if not after_dot and _dotted_at(tokens, index, parts) == key:
                    out.append(renames[key])
                    last = tokens[index + parts * 2 - 2]
                    cursor = starts[last.end[0] - 1] + last.end[1]
                    index += parts * 2 - 1
                    break
            else:
                out.append(renames.get(token.string, token.string))
                index += 1
            continue
        if words is not None and token.type in (tokenize.STRING, tokenize.COMMENT):
            out.append(words.sub(lambda found: renames[found.group()], token.string))
        else:
            out.append(token.string)
        index += 1
    out.append(text[cursor:])
    return "".join(out)


def _ruff() -> str:
    found = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if found is None:
        raise GenerationError("ruff is not installed (pip install -e '.[dev]')")
    return found


def _formatted(text: str, target: Path, root: Path) -> str:
    ruff = _ruff()
    name = str(root / target)
    for command in (
        [ruff, "check", "--quiet", "--fix-only", "--select", "I", "--stdin-filename", name, "-"],
        [ruff, "format", "--quiet", "--stdin-filename", name, "-"],
    ):
        done = subprocess.run(
            command, input=text, capture_output=True, text=True, cwd=root, check=False
        )
        if done.returncode != 0:
            raise GenerationError(f"ruff failed on {target}: {done.stderr.strip()}")
        text = done.stdout
    return text


def generate(source: str, text: str, target: Path, root: Path = ROOT) -> str:
    """The sync twin of ``text``, the written module at ``source``."""
    body = rename(drop_async_only_lines(drop_async_branches(text)))
    body = HEADER.format(source=source) + body
    try:
        ast.parse(body)
    except SyntaxError as error:
        raise GenerationError(f"{target} would not parse: line {error.lineno}") from None
    return _formatted(body, target, root)


def _generated_files(root: Path) -> Iterator[Path]:
    for path in sorted((root / PACKAGE).rglob("*.py")):
        with path.open(encoding="utf-8") as file:
            if file.readline().startswith(GENERATED_MARK):
                yield path.relative_to(root)


def run(
    pairs: Sequence[tuple[str, str]] = PAIRS, *, root: Path = ROOT, check: bool = False
) -> list[str]:
    """Write (or, with ``check``, only compare) each generated module; return the problems."""
    problems = []
    listed = {Path(target) for _, target in pairs}
    for source, target in pairs:
        expected = generate(source, (root / source).read_text(encoding="utf-8"), Path(target), root)
        path = root / target
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == expected:
            continue
        if check:
            problems.append(f"{target} is {'stale' if current else 'missing'}: run {__file__}")
        else:
            path.write_text(expected, encoding="utf-8")
    for path in _generated_files(root):
        if path not in listed:
            problems.append(f"{path} is headed as generated but no written module makes it")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; fail if stale")
    arguments = parser.parse_args(argv)
    try:
        problems = run(check=arguments.check)
    except GenerationError as error:
        print(f"async_to_sync: {error}", file=sys.stderr)
        return 1
    for problem in problems:
        print(f"async_to_sync: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
