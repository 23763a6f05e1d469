"""The command line under hostile arguments and files (property-based): whatever it is
given, it answers with one of its documented exit codes, never a traceback, and never
shows a secret it was given (in a connection string, a URL's password, an option's value
or a stray argument). A SQLite file's path is not a secret: the store's errors name it."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tool_execution_checkpoint import SQLiteStore, cli

SECRET = "s3cr3t-7e1d"
EXAMPLES = int(os.environ.get("TOOL_CHECKPOINT_CLI_EXAMPLES", "400"))
"""Derandomized, so CI runs the same 400; set the variable for a longer search."""
COMMANDS = ["inspect", "show", "list", "reconcile", "prune", "spec"]
OPTIONS = [
    "--format",
    "--status",
    "--older-than",
    "--retention",
    "--revision",
    "--complete",
    "--complete-error",
    "--mark-uncertain",
    "--release-delivery",
    "--confirm-delivery",
    "--dry-run",
    "--payload",
    "--url",
    "--key",
    "--schema",
    "--table",
    "--prefix",
    "-",
    "--",
]
HOSTILE = [
    SECRET,
    f"host=db.internal user=ops password={SECRET}",
    f"redis://:{SECRET}@127.0.0.1:1/0?socket_connect_timeout=0.2",
    f"sqlite:relative%00{SECRET}.db",
    f"--format={SECRET}",
    f"--older-than={SECRET}",
    f"--revision={SECRET}",
    f"--fo={SECRET}",
    f"nope://user:{SECRET}@host/x",
    "9" * 400,
    "1e999",
    "-1",
    "\x00",
    "\ud800",
    "",
]


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Files and stores to name: a real store, deep JSON, a valid-looking and a broken
    record, bytes that are not UTF-8, an endless file, a directory."""
    root = tmp_path_factory.mktemp("hostile")
    SQLiteStore(root / "calls.db").close()
    (root / "deep.json").write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    (root / "broken.json").write_text(json.dumps({"schemaVersion": 1, "x": 2**70}))
    (root / "bytes.bin").write_bytes(b"\xff\xfe\x00{" * 64)
    return [
        f"sqlite:{root / 'calls.db'}",
        str(root / "calls.db"),
        str(root / "deep.json"),
        str(root / "broken.json"),
        str(root / "bytes.bin"),
        "/dev/zero",
        str(root),
    ]


@contextlib.contextmanager
def _captured() -> Iterator[io.StringIO]:
    """stdout and stderr into one buffer; stdin empty."""
    out = io.StringIO()
    stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(b""))
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            yield out
    finally:
        sys.stdin = stdin


def _argv(places: list[str]) -> st.SearchStrategy[list[str]]:
    token = st.one_of(
        st.sampled_from(OPTIONS),
        st.sampled_from(HOSTILE),
        st.sampled_from(places),
        st.text(max_size=12),
    )
    return st.builds(
        lambda command, rest: [command, *rest],
        st.sampled_from(COMMANDS),
        st.lists(token, max_size=6),
    )


def test_any_arguments_get_a_documented_exit_and_never_show_a_secret(places: list[str]) -> None:
    codes = {int(code) for code in cli.Exit}

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(_argv(places))
    def check(argv: list[str]) -> None:
        with _captured() as printed:
            try:
                code = cli.main(argv)
            except SystemExit as leaving:  # argparse's usage errors and --help
                code = leaving.code if isinstance(leaving.code, int) else -1
        text = printed.getvalue()
        assert code in codes, f"exit {code} for {len(argv)} arguments"
        assert SECRET not in text, "a secret given to the command line was shown"
        assert "Traceback" not in text

    check()
