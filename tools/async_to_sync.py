"""Generate the synchronous twin of each written asyncio module, or check that it is current.

The I/O half is written once, for asyncio; its sync twin is this script's output and is
never edited by hand. ``PAIRS`` lists each written module and the module generated from it;
``RENAMES`` maps the names that differ. A generated module is:

- the written module with ``async`` dropped before ``def``, ``with`` and ``for``, and
  ``await`` dropped;
- each name in ``RENAMES`` renamed, as a token in the code and as a whole word in strings and
  comments (a dotted key such as ``asyncio.sleep`` matches the dotted name);
- each ``if True:  # ASYNC`` block replaced by the body of its ``else:`` (or nothing), and
  each line whose comment is ``# ASYNC-ONLY`` dropped (either marker may be followed by
  free text; only a comment is a marker, not text in a string);
- headed by ``HEADER`` and formatted by ruff (imports sorted, then ``ruff format``).

A written module is refused (:class:`GenerationError`) if a comment holds ``ASYNC`` but is
no marker, if ``async``, ``await`` or a rename key is inside an f-string (Python 3.11 and
3.12 tokenize those differently), or if its sync twin does not compile or still holds
asyncio: an ``await``, an ``async`` statement or comprehension, an ``if True:``, or a name
in ``ASYNC_NAMES``. CRLF line endings are read as LF.

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

ASYNC_NAMES = frozenset(
    {
        "asyncio",
        "Awaitable",
        "Coroutine",
        "AsyncIterator",
        "AsyncIterable",
        "AsyncGenerator",
        "anext",
        "aiter",
        "StopAsyncIteration",
        "__aiter__",
        "__anext__",
        "__aenter__",
        "__aexit__",
    }
)
"""Names (also as attributes, and as parts of a dotted import) a generated module must not
hold: each belongs to asyncio, so one left in a sync module is a rename or an ASYNC block
missed."""

_MARK = "ASYNC"
_BRANCH_MARK = re.compile(r"# ASYNC(?![\w-])")
_ONLY_MARK = re.compile(r"# ASYNC-ONLY(?![\w-])")
_BRANCH_CODE = "if True:"
_DROPPED_BEFORE = frozenset({"def", "with", "for"})
_FSTRING_PREFIX = re.compile(r"[A-Za-z]*")
_FSTRING_START = getattr(tokenize, "FSTRING_START", None)  # Python 3.12+
_FSTRING_MIDDLE = getattr(tokenize, "FSTRING_MIDDLE", None)
_FSTRING_END = getattr(tokenize, "FSTRING_END", None)


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


def _markers(text: str) -> list[str | None]:
    """For each line of ``text``, the marker its comment is: ``"branch"`` (``# ASYNC`` on
    an ``if True:`` line), ``"only"`` (``# ASYNC-ONLY``), or None.

    Raises:
        GenerationError: for a comment that holds ``ASYNC`` but is no marker, and for a
            branch marker on a line that is not ``if True:``.
    """
    lines = text.splitlines(keepends=True)
    kinds: list[str | None] = [None] * len(lines)
    for token in _tokens(text):
        if token.type != tokenize.COMMENT or _MARK not in token.string:
            continue
        row, column = token.start
        if _ONLY_MARK.match(token.string):
            kinds[row - 1] = "only"
        elif not _BRANCH_MARK.match(token.string):
            raise GenerationError(
                f"line {row}: a comment holds {_MARK} but is no marker "
                "(`if True:  # ASYNC` or `# ASYNC-ONLY`, each maybe followed by free text)"
            )
        elif lines[row - 1][:column].strip() != _BRANCH_CODE:
            raise GenerationError(f"line {row}: an ASYNC marker on a line that is not `if True:`")
        else:
            kinds[row - 1] = "branch"
    return kinds


def drop_async_branches(text: str) -> str:
    """Replace each ``if True:  # ASYNC`` block by its ``else:`` body, one level out."""
    lines = text.splitlines(keepends=True)
    kinds = _markers(text)
    index = 0
    while index < len(lines):
        if kinds[index] != "branch":
            index += 1
            continue
        indent = _indent(lines[index])
        body_end = _block(lines, index + 1, indent)
        if body_end == index + 1:
            raise GenerationError(f"line {index + 1}: an ASYNC branch with no body")
        else_body: list[str] = []
        else_kinds: list[str | None] = []
        end = body_end
        if body_end < len(lines) and lines[body_end].rstrip() == " " * indent + "else:":
            end = _block(lines, body_end + 1, indent)
            body = lines[body_end + 1 : end]
            step = _indent(next(line for line in body if line.strip())) - indent
            else_body = _dedented(body, step, body_end + 1)
            else_kinds = kinds[body_end + 1 : end]
        lines[index:end] = else_body
        kinds[index:end] = else_kinds
    return "".join(lines)


def drop_async_only_lines(text: str) -> str:
    """Drop each line whose comment is ``# ASYNC-ONLY``."""
    lines = text.splitlines(keepends=True)
    kinds = _markers(text)
    return "".join(line for line, kind in zip(lines, kinds, strict=True) if kind != "only")


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


def _check_fstrings(tokens: Sequence[tokenize.TokenInfo], renames: Mapping[str, str]) -> None:
    """Refuse ``async``, ``await`` or a renamed name (a dotted one's first part) anywhere
    in an f-string, code or text: Python 3.11 reads an f-string as one STRING token, 3.12
    as code and text, so each would rewrite it differently."""
    banned = {key.split(".")[0] for key in renames} | {"async", "await"}
    words = re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, sorted(banned))) + r")(?!\w)")
    depth = 0
    for token in tokens:
        if token.type == _FSTRING_START:
            depth += 1
        elif token.type == _FSTRING_END:
            depth -= 1
        if token.type == tokenize.STRING:
            prefix = _FSTRING_PREFIX.match(token.string)
            inside = prefix is not None and "f" in prefix.group().lower()
        else:
            inside = depth > 0 and token.type in (tokenize.NAME, _FSTRING_MIDDLE)
        if inside and words.search(token.string) is not None:
            raise GenerationError(
                f"line {token.start[0]}: async, await or a renamed name inside an f-string "
                "(Python versions tokenize f-strings differently): build the text outside it"
            )


def rename(text: str, renames: Mapping[str, str] = RENAMES) -> str:
    """Drop ``async`` and ``await`` and apply ``renames``, keeping every other character."""
    tokens = _tokens(text)
    starts = _offsets(text)
    words = _word_pattern(renames)
    dotted = sorted(
        ((key.count(".") + 1, key) for key in renames if "." in key),
        reverse=True,
    )
    _check_fstrings(tokens, renames)
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


def _async_left(node: ast.AST) -> str | None:
    """What of asyncio ``node`` is, if anything: its kind, or the name it uses."""
    if isinstance(node, ast.Await | ast.AsyncFunctionDef | ast.AsyncWith | ast.AsyncFor):
        return type(node).__name__
    if isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
        return "an async comprehension" if any(f.is_async for f in node.generators) else None
    if isinstance(node, ast.If) and isinstance(node.test, ast.Constant) and node.test.value is True:
        return "an `if True:` (an ASYNC branch whose marker was not read)"
    names: list[str] = []
    if isinstance(node, ast.Name):
        names = [node.id]
    elif isinstance(node, ast.Attribute):
        names = [node.attr]
    elif isinstance(node, ast.FunctionDef | ast.ClassDef):
        names = [node.name]
    elif isinstance(node, ast.alias):
        names = [*node.name.split("."), node.asname or ""]
    elif isinstance(node, ast.ImportFrom):
        names = (node.module or "").split(".")
    return next((name for name in names if name in ASYNC_NAMES), None)


def check_sync(text: str, target: Path) -> None:
    """Refuse ``text``, the generated module at ``target``, if it holds asyncio: an
    ``await``, an ``async`` statement or comprehension, an ``if True:``, or a name in
    ``ASYNC_NAMES``."""
    found = sorted(
        (getattr(node, "lineno", 0), left)
        for node in ast.walk(ast.parse(text))
        if (left := _async_left(node)) is not None
    )
    if found:
        where = "; ".join(f"line {line}: {left}" for line, left in found)
        raise GenerationError(f"{target} holds asyncio left in the sync module: {where}")


def generate(source: str, text: str, target: Path, root: Path = ROOT) -> str:
    """The sync twin of ``text``, the written module at ``source``."""
    text = text.replace("\r\n", "\n")
    body = rename(drop_async_only_lines(drop_async_branches(text)))
    body = HEADER.format(source=source) + body
    try:
        compile(body, str(target), "exec", dont_inherit=True)
    except SyntaxError as error:
        raise GenerationError(
            f"{target} would not compile: line {error.lineno}: {error.msg}"
        ) from None
    made = _formatted(body, target, root)
    check_sync(made, target)
    return made


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
