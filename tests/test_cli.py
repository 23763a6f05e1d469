"""The command line: the demo, the table, exit codes, check-store on factories and store
URLs (SQLite, and the test PostgreSQL and Redis servers), and the progress line."""

from __future__ import annotations

import importlib
import io
import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
import redis

from postgres_server import PostgresServer, free_port, postgres_server, postgres_url  # noqa: F401
from redis_server import redis_url  # noqa: F401
from test_operations import SECRET as PAYLOAD
from test_operations import STUCK, STUCK_KEY, place_stuck
from tool_execution_checkpoint import (
    TABLE,
    Binding,
    CheckpointError,
    Listing,
    MemoryStore,
    SQLiteStore,
    Status,
    checkpoint_key,
    claim_execution,
    cli,
    create_checkpoint,
    register_store,
    run_once,
)
from tool_execution_checkpoint.cli import demo as cli_demo
from tool_execution_checkpoint.cli import operators
from tool_execution_checkpoint.cli.common import UsageError
from tool_execution_checkpoint.progress import Progress, format_elapsed
from tool_execution_checkpoint.rendering import render_markdown, render_mermaid
from tool_execution_checkpoint.runner import RunOutcome, RunStatus
from tool_execution_checkpoint.stores.opening import _SCHEMES
from tool_execution_checkpoint.stores.postgres import PostgresStore
from tool_execution_checkpoint.stores.redis import RedisStore
from tool_execution_checkpoint.testing import check_store
from tool_execution_checkpoint.testing.conformance import leaks


def test_the_demo_runs_the_tool_once_and_recovers(tmp_path: Path) -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "tool_execution_checkpoint",
            "demo",
            "--path",
            str(tmp_path / "d.db"),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "delivery-failed" in run.stdout
    assert "delivered-stored-result" in run.stdout
    assert "e-mails sent: 1; results delivered: 1" in run.stdout


def test_the_demo_fails_when_the_tool_runs_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def naive(store: Any, binding: Any, tool: Any, deliver: Any) -> RunOutcome:
        del store, binding, deliver
        tool()  # reruns on every reconnect: the bug this library exists for
        return RunOutcome(RunStatus.EXECUTED_AND_DELIVERED, True, None)

    monkeypatch.setattr(cli_demo, "run_once", naive)
    assert cli.main(["demo", "--path", str(tmp_path / "d.db")]) == 1
    assert "ran more than once" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("form", "expected"),
    [("markdown", render_markdown(TABLE)), ("mermaid", render_mermaid(TABLE))],
)
def test_spec_prints_the_rendered_table(
    form: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["spec", "--format", form]) == 0
    assert capsys.readouterr().out == expected


def test_spec_as_json_and_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["spec", "--format", "json"]) == 0
    table = json.loads(capsys.readouterr().out)
    assert list(table["statuses"]) == [str(status) for status in TABLE.statuses]
    assert table["transitions"]["claim_execution"]["grants"] == "execute"
    assert cli.main(["spec"]) == 0
    text = capsys.readouterr().out
    for name in TABLE.transitions:
        assert name in text


def test_bad_usage_exits_2() -> None:
    with pytest.raises(SystemExit) as caught:
        cli.main(["nonsense"])
    assert caught.value.code == 2


def _filled_store(path: Path) -> str:
    """A SQLite store with one delivered and one executing record; returns its URL."""
    store = SQLiteStore(path)
    delivered = Binding("cli", "call-delivered", "tool", "1", "sha256:0")
    sent: list[object] = []
    run_once(store, delivered, lambda: {"ok": True}, sent.append)
    stuck = Binding("cli", "call-stuck", "tool", "1", "sha256:0")
    record = create_checkpoint(stuck, created_at="2026-01-01T00:00:00Z")
    store.create_if_absent(checkpoint_key(stuck), record)
    claim = claim_execution(record, attempt_id="gone", at="2026-01-01T00:00:01Z")
    store.compare_and_swap(checkpoint_key(stuck), claim.expected_revision, claim.next)
    store.close()
    return f"sqlite://{path}"


def test_inspect_reads_a_file_and_a_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _filled_store(tmp_path / "s.db")
    key = checkpoint_key(Binding("cli", "call-stuck", "tool", "1", "sha256:0"))
    assert cli.main(["inspect", "--url", url, "--key", key]) == 0
    out = capsys.readouterr().out
    assert "valid: status=executing revision=2 decide=reconcile-execution" in out
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"schemaVersion": 1, "revision": 0}), encoding="utf-8")
    assert cli.main(["inspect", str(broken)]) == 3
    assert "invalid: INVALID_CHECKPOINT" in capsys.readouterr().out


def test_list_finds_stuck_claims_and_prune_keeps_tombstones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _filled_store(tmp_path / "s.db")
    arguments = ["list", url, "--status", "executing", "--older-than", "60", "--format", "json"]
    assert cli.main(arguments) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["call_id"] for row in rows] == ["call-stuck"]
    assert cli.main(["prune", url, "--retention", "0"]) == 0
    assert "pruned 1 delivered payloads" in capsys.readouterr().out
    assert cli.main(["list", url]) == 0
    table = capsys.readouterr().out
    assert "call-delivered" in table
    assert "call-stuck" in table


def test_bad_store_urls_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["list", "ftp://example/x"]) == 2
    assert "store URL" in capsys.readouterr().err
    assert cli.main(["list", "sqlite:///no/such/dir/x.db"]) == 4


def test_check_store_passes_a_good_store_and_fails_a_broken_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    factory = "tool_execution_checkpoint.stores.memory:MemoryStore"
    assert cli.main(["check-store", factory, "--examples", "20"]) == 0
    assert "the store passed every check" in capsys.readouterr().out
    assert cli.main(["check-store", "broken:RevisionBlindStore", "--examples", "100"]) == 5
    report = capsys.readouterr().out
    assert "FAIL  compare_and_swap_with_a_stale_revision_fails_and_changes_nothing" in report
    assert "FAIL  protocol_harness" in report
    assert cli.main(["check-store", "no_such_module:factory"]) == 2


# --- check-store on store URLs ------------------------------------------------------------

# The smallest harness budget that still runs every check (each example gets a store).
EXAMPLES = "2"
SECRET = "Sup3r-s3cret"


def _user_binding() -> Binding:
    return Binding("user", "call-kept", "tool", "1", "sha256:0")


def _put_user_record(store: Any) -> dict[str, Any]:
    """Write one record the way an application would; return it as stored."""
    binding = _user_binding()
    key = checkpoint_key(binding)
    assert store.create_if_absent(
        key, create_checkpoint(binding, created_at="2026-01-01T00:00:00Z")
    )
    stored = dict(store.get(key))
    store.close()
    return stored


def _password(url: str) -> str:
    password = urlsplit(url).password
    assert password
    return password


def _check_store(
    target: str, capsys: pytest.CaptureFixture[str], *, storm: bool = False
) -> tuple[int, str, str]:
    """check-store on ``target``; without ``storm``, --no-storm (the storm has its own
    tests, below and on each server)."""
    code = cli.main(
        ["check-store", target, "--examples", EXAMPLES, "--storm" if storm else "--no-storm"]
    )
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_check_store_on_a_sqlite_url_uses_a_new_directory_and_removes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _filled_store(tmp_path / "s.db")
    before = sorted(path.name for path in tmp_path.iterdir())
    code, out, err = _check_store(url + "?busy_timeout=5", capsys, storm=True)
    assert code == 0, out + err
    assert "the store passed every check" in out
    assert "ok    kill_storm" in out  # its store too is in the new directory
    assert "ok    protocol_harness" in out
    assert "ok    list_records_matches_the_model" in out  # SQLiteStore lists: all checks
    assert f"deleted the directory {tmp_path}/.tec-check-" in out
    assert sorted(path.name for path in tmp_path.iterdir()) == before
    assert cli.main(["list", url, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert sorted(row["call_id"] for row in rows) == ["call-delivered", "call-stuck"]


def test_check_store_s_storm_fails_a_store_atomic_only_within_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The storm's workers open the scratch store's URL as a ProcessLocalStore (the
    broken store of tests/storm_stores.py): check-store fails it, and says why."""
    monkeypatch.setattr(check_store, "STORM_FACTORY", "storm_stores:process_local_url")
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parent))
    code, out, err = _check_store(f"sqlite://{tmp_path}/s.db", capsys, storm=True)
    assert code == 5, out + err
    assert re.search(r"FAIL  kill_storm: round-\d+: the tool ran \d+ times", out), out
    assert "1 of the checks failed" in out
    assert list(tmp_path.iterdir()) == []


def test_check_store_on_a_sqlite_url_never_opens_the_named_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _check_store(f"sqlite://{tmp_path}/not-yet.db", capsys)
    assert code == 0, out + err
    assert list(tmp_path.iterdir()) == []


def test_check_store_removes_its_scratch_space_when_interrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(make_store: Any, *_: Any) -> int:
        make_store()
        assert any(tmp_path.iterdir())
        raise KeyboardInterrupt

    monkeypatch.setattr(check_store, "run_checks", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cli.main(["check-store", f"sqlite://{tmp_path}/s.db"])
    assert list(tmp_path.iterdir()) == []
    assert capsys.readouterr().err == ""


def _scratch_tables(server: PostgresServer) -> list[str]:
    with psycopg.connect(server.admin_url, autocommit=True) as connection:
        rows = connection.execute(
            "SELECT tablename FROM pg_tables WHERE tablename LIKE 'tec\\_check\\_%'"
        ).fetchall()
    return [row[0] for row in rows]


def test_check_store_on_a_postgres_url_uses_new_tables_and_drops_them(
    postgres_server: PostgresServer,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = postgres_server.url
    kept = _put_user_record(PostgresStore(url))
    code, out, err = _check_store(url, capsys, storm=True)
    assert code == 0, out + err
    assert "the store passed every check" in out
    assert "ok    kill_storm" in out  # its workers opened a new table by --table
    assert re.search(r"dropped the \d+ tables public\.tec_check_[0-9a-f]{8}_N", out)
    assert postgres_server.app_password not in out + err
    assert _scratch_tables(postgres_server) == []
    with PostgresStore(url) as store:
        assert store.get(checkpoint_key(_user_binding())) == kept
        assert len(store.list_records(Listing(list(TABLE.statuses)))) == 1


def test_check_store_on_a_redis_url_uses_new_prefixes_and_deletes_their_keys(
    redis_url: str,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    client = redis.Redis.from_url(redis_url)
    try:
        kept = _put_user_record(RedisStore.from_url(redis_url))
        keys_before = set(client.keys("*"))
        code, out, err = _check_store(redis_url, capsys, storm=True)
        assert code == 0, out + err
        assert "the store passed every check" in out
        assert "ok    kill_storm" in out  # its workers wrote under a new prefix
        assert "keys matching tec-check-" in out
        assert _password(redis_url) not in out + err
        assert set(client.keys("*")) == keys_before
    finally:
        client.close()
    with RedisStore.from_url(redis_url) as store:
        assert store.get(checkpoint_key(_user_binding())) == kept


@pytest.mark.parametrize(
    "url",
    [
        f"ftp://user:{SECRET}@example/x",
        f"sqlite://user:{SECRET}@host/x.db",
        "sqlite:///relative/../:memory:?busy_timeout=1&busy_timeout=2",
        f"redis://:{SECRET}@127.0.0.1:not-a-port/0",
        f"rediss://:{SECRET}@127.0.0.1:99999999/0",
    ],
)
def test_check_store_on_a_bad_url_exits_2_without_the_password(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _check_store(url, capsys)
    assert code == 2
    assert err.startswith("tool-checkpoint: ")
    assert SECRET not in out + err


def test_check_store_on_an_unreachable_server_exits_4_without_the_password(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    port = free_port()
    for url in (
        f"postgresql://tec_app:{SECRET}@127.0.0.1:{port}/tec",
        f"redis://:{SECRET}@127.0.0.1:{port}/0",
        f"sqlite://{tmp_path}/no-such-directory/x.db",
    ):
        code, out, err = _check_store(url, capsys)
        assert code == 4, url
        assert "the store failed" in err
        assert "ok    " not in out
        assert SECRET not in out + err


def test_check_store_with_a_wrong_password_exits_4_without_it(
    postgres_server: PostgresServer,  # noqa: F811
    redis_url: str,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    wrong = f"wrong-{SECRET}"
    password = _password(redis_url)
    for url in (postgres_server.url_with_password(wrong), redis_url.replace(password, wrong)):
        code, out, err = _check_store(url, capsys)
        assert code == 4, out + err
        assert "the store failed" in err
        assert SECRET not in out + err
    assert _scratch_tables(postgres_server) == []


def test_check_store_refuses_a_zero_example_budget() -> None:
    with pytest.raises(SystemExit) as caught:
        cli.main(["check-store", "sqlite:///tmp/x.db", "--examples", "0"])
    assert caught.value.code == 2


def test_url_secrets_finds_every_form_of_the_password() -> None:
    url = "postgresql://app:p%40ss@db:5432/app?password=other&sslmode=require"
    hidden = cli.url_secrets(url)
    assert set(hidden) == {"p%40ss", "p@ss", "other"}
    assert cli.redact(f"at {url}", hidden) == (
        "at postgresql://app:***@db:5432/app?password=***&sslmode=require"
    )
    assert cli.url_secrets("sqlite:///var/x.db") == ()


def test_check_store_help_says_what_it_creates_and_removes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        cli.main(["check-store", "--help"])
    text = capsys.readouterr().out
    for promise in (".tec-check-XXXXXXXX", "SCHEMA.tec_check_RUN_N", "tec-check-RUN-*", "never"):
        assert promise in text


# --- the progress line --------------------------------------------------------------------


class FakeTTY(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_format_elapsed() -> None:
    assert [format_elapsed(s) for s in (0, 4.9, 62, 3723)] == ["0:00", "0:04", "1:02", "1:02:03"]


def test_progress_on_a_terminal_redraws_one_line_in_place() -> None:
    stream, clock = FakeTTY(), Clock()
    with Progress("listing", stream=stream, clock=clock) as progress:
        clock.now += 1
        progress.update(500)
        clock.now += 0.01
        progress.update(1_000)  # within redraw_every: not drawn
        assert stream.getvalue().count("\r") == 1
        clock.now += 3
        progress.update(12_500)
    frames = stream.getvalue().split("\r")[1:]
    assert stream.getvalue().endswith("\n")
    assert "\n" not in "".join(frames[:-1])
    assert frames[0].startswith("listing [")
    assert "500 records  500/s  0:01" in frames[0]
    assert "12,500 records  3,117/s  0:04" in frames[1]
    # finish draws the last state once more (the bar moves on), then ends the line
    assert frames[2].split("] ")[1] == frames[1].split("] ")[1] + "\n"


def test_progress_pads_a_shorter_line_over_the_longer_one() -> None:
    stream, clock = FakeTTY(), Clock()
    progress = Progress("listing", stream=stream, clock=clock)
    clock.now += 1
    progress.update(1_000_000)
    long = stream.getvalue()
    clock.now += 999
    progress.update(1_000_001)
    short = stream.getvalue()[len(long) :]
    assert "1,000,001 records  1,000/s  16:40" in short
    assert len(short) == len(long)
    assert short.endswith(" ")


def test_progress_with_a_total_fills_the_bar() -> None:
    stream, clock = FakeTTY(), Clock()
    progress = Progress("pruning", total=200, width=10, stream=stream, clock=clock)
    progress.update(100)
    assert "[=====     ]  50% 100 records" in progress.line()
    progress.finish()
    progress.finish()
    assert stream.getvalue().count("\n") == 1


def test_progress_elsewhere_is_silent_on_short_work_and_plain_on_long_work() -> None:
    stream, clock = io.StringIO(), Clock()
    with Progress("listing", stream=stream, clock=clock) as progress:
        progress.update(500)
        clock.now += 9
        progress.update(1_000)
    assert stream.getvalue() == ""
    with Progress("listing", stream=stream, clock=clock) as progress:
        clock.now += 10
        progress.update(2_000)
        clock.now += 5
        progress.update(3_000)
    assert stream.getvalue() == (
        "listing: 2,000 records, 200/s, 0:10\nlisting: 3,000 records, 200/s, 0:15\n"
    )


@pytest.fixture
def listed_store(tmp_path: Path) -> str:
    return _filled_store(tmp_path / "s.db")


def test_list_and_prune_keep_stderr_empty_when_it_is_not_a_terminal(
    listed_store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["list", listed_store, "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert len(json.loads(captured.out)) == 2
    assert captured.err == ""
    assert cli.main(["prune", listed_store, "--retention", "0"]) == 0
    assert capsys.readouterr().err == ""


def test_list_and_prune_draw_the_progress_line_on_a_terminal(
    listed_store: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    terminal = FakeTTY()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert cli.main(["list", listed_store, "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 2  # stdout stays clean JSON
    assert terminal.getvalue().startswith("\rlisting [")
    assert " 2 records " in terminal.getvalue()
    assert terminal.getvalue().endswith("\n")
    assert cli.main(["prune", listed_store, "--retention", "0"]) == 0
    assert "\rpruning [" in terminal.getvalue()
    assert "delivered records examined" in terminal.getvalue()


AT = "2026-01-01T00:00:00Z"


def test_list_inspect_prune_and_check_store_reach_a_postgres_table_outside_public(
    postgres_server: PostgresServer,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--schema and --table name where the records are; check-store's --schema is where
    its new tables go (a role without CREATE on public can still vet the store)."""
    url = postgres_server.url
    with psycopg.connect(postgres_server.admin_url, autocommit=True) as admin:
        admin.execute("CREATE SCHEMA IF NOT EXISTS ops")
        admin.execute("GRANT USAGE, CREATE ON SCHEMA ops TO tec_app")
    binding = Binding("user", "call-in-ops", "tool", "1", "sha256:0")
    key = checkpoint_key(binding)
    with PostgresStore(url, schema="ops", table="calls") as store:
        assert store.create_if_absent(key, create_checkpoint(binding, created_at=AT))
        kept = dict(store.get(key) or {})
    where = ["--schema", "ops", "--table", "calls"]
    assert cli.main(["list", url, "--format", "json", *where]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(row["key"], row["status"]) for row in rows] == [(key, "ready")]
    with PostgresStore(url) as public:  # made here: list creates no table
        assert public.get(key) is None
    assert cli.main(["list", url, "--format", "json"]) == 0  # public.tec_checkpoint
    assert key not in capsys.readouterr().out
    assert cli.main(["inspect", "--url", url, "--key", key, *where]) == 0
    assert "valid: status=ready revision=1 decide=execute" in capsys.readouterr().out
    assert cli.main(["prune", url, "--retention", "0", *where]) == 0
    assert "pruned 0 delivered payloads" in capsys.readouterr().out
    code = cli.main(["check-store", url, "--examples", EXAMPLES, "--schema", "ops"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert re.search(r"dropped the \d+ tables ops\.tec_check_[0-9a-f]{8}_N", out)
    assert _scratch_tables(postgres_server) == []
    with PostgresStore(url, schema="ops", table="calls") as store:
        assert store.get(key) == kept


def test_list_with_a_redis_prefix_reads_only_that_prefix(
    redis_url: str,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    _put_user_record(RedisStore.from_url(redis_url, prefix="cli-prefix:"))
    key = checkpoint_key(_user_binding())
    assert cli.main(["list", redis_url, "--format", "json", "--prefix", "cli-prefix:"]) == 0
    assert [row["key"] for row in json.loads(capsys.readouterr().out)] == [key]
    assert cli.main(["list", redis_url, "--format", "json", "--prefix", "cli-other:"]) == 0
    assert json.loads(capsys.readouterr().out) == []


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["list", "sqlite:///{dir}/s.db", "--table", "t"], "--table does not apply to a sqlite"),
        (["prune", "sqlite:///{dir}/s.db", "--retention", "1", "--prefix", "p:"], "--prefix"),
        (
            ["list", "redis://127.0.0.1:9/0", "--schema", "s"],
            "--schema does not apply to a redis URL (it takes --prefix)",
        ),
        (["inspect", "--schema", "s", "-"], "--schema needs --url"),
        (["check-store", "sqlite:///{dir}/s.db", "--schema", "s"], "--schema applies to a"),
        (["check-store", "tests.broken:nothing", "--schema", "s"], "--schema applies to a"),
        (["check-store", "postgresql://u:pw@127.0.0.1:9/x", "--schema", ""], "INVALID_ARGUMENT"),
        (["list", "postgresql://u:pw@127.0.0.1:9/x", "--schema", ""], "INVALID_ARGUMENT"),
    ],
)
def test_a_store_option_the_url_does_not_take_is_a_usage_error(
    arguments: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main([argument.replace("{dir}", str(tmp_path)) for argument in arguments])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert list(tmp_path.iterdir()) == []  # refused before anything was opened


# --- show, list's keys and ages, reconcile ---------------------------------------------------


def _stuck_sqlite(tmp_path: Path, status: Status) -> str:
    """A SQLite store holding STUCK's record in ``status``; returns its URL."""
    store = SQLiteStore(tmp_path / "stuck.db")
    place_stuck(store, status)
    store.close()
    return f"sqlite://{tmp_path / 'stuck.db'}"


def _stored(url: str) -> Any:
    store = SQLiteStore(urlsplit(url).path)
    try:
        return store.get(STUCK_KEY)
    finally:
        store.close()


def test_show_prints_the_whole_record_and_the_payload_only_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _stuck_sqlite(tmp_path, Status.DELIVERING)
    assert cli.main(["show", url, STUCK_KEY]) == 0
    text = capsys.readouterr().out
    for shown in (
        STUCK_KEY,
        "delivering (decide: reconcile-delivery)",
        "revision:         4",
        STUCK.call_id,
        "tool, revision 1",
        "dead-attempt",
        "dead-delivery",
        f"{len(json.dumps(PAYLOAD))} bytes of JSON",
        "pass --payload",
    ):
        assert shown in text, shown
    assert PAYLOAD not in text
    assert cli.main(["show", url, STUCK_KEY, "--format", "json"]) == 0
    shown_json = json.loads(capsys.readouterr().out)
    assert shown_json["key"] == STUCK_KEY
    assert shown_json["decide"] == "reconcile-delivery"
    assert shown_json["payloadBytes"] == len(json.dumps(PAYLOAD))
    assert shown_json["record"]["delivery"]["deliveryId"] == "dead-delivery"
    assert "payload" not in shown_json["record"]["result"]
    assert PAYLOAD not in json.dumps(shown_json)
    assert cli.main(["show", url, STUCK_KEY, "--payload"]) == 0
    assert PAYLOAD in capsys.readouterr().out
    assert cli.main(["show", url, STUCK_KEY, "--payload", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["record"]["result"]["payload"] == PAYLOAD


def test_show_an_uncertain_record_gives_its_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _stuck_sqlite(tmp_path, Status.UNCERTAIN)
    assert cli.main(["show", url, STUCK_KEY]) == 0
    text = capsys.readouterr().out
    assert "uncertain:" in text
    assert "reconcile-execution" in text


def test_a_missing_key_is_its_own_exit_code_not_an_invalid_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _stuck_sqlite(tmp_path, Status.EXECUTING)
    other = checkpoint_key(Binding("cli", "nobody", "tool", "1", "sha256:0"))
    assert cli.main(["show", url, other]) == cli.Exit.NO_RECORD
    assert cli.main(["inspect", "--url", url, "--key", other]) == cli.Exit.NO_RECORD
    arguments = ["reconcile", url, other, "--revision", "2", "--mark-uncertain", "dead"]
    assert cli.main(arguments) == cli.Exit.NO_RECORD
    assert other not in capsys.readouterr().err


def test_list_shows_each_key_and_age_and_reports_stuck_calls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _stuck_sqlite(tmp_path, Status.EXECUTING)  # updated in 2026-01, long ago
    assert cli.main(["list", url, "--status", "executing", "--older-than", "1h"]) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[0].split()[:4] == ["key", "status", "rev", "age"]
    assert STUCK_KEY in table
    assert re.search(r"\d+d \d+h", table)
    arguments = ["list", url, "--status", "executing", "--older-than", "2d", "--format", "json"]
    assert cli.main(arguments) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["key"] for row in rows] == [STUCK_KEY]
    assert rows[0]["age_seconds"] > 86_400
    # updated long ago, not within the last 100,000 days: nothing that young is stuck
    assert cli.main([*arguments[:5], "100000d", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


@pytest.mark.parametrize("text", ["1x", "-5", "h", ""])
def test_a_bad_duration_is_a_usage_error(text: str, tmp_path: Path) -> None:
    url = _stuck_sqlite(tmp_path, Status.EXECUTING)
    with pytest.raises(SystemExit) as caught:
        cli.main(["list", url, "--older-than", text])
    assert caught.value.code == 2


def test_durations_ages_and_exit_codes() -> None:
    assert (cli.Exit.NO_RECORD, cli.Exit.REVISION_MOVED, cli.Exit.NOT_ALLOWED) == (6, 7, 8)
    assert [cli.duration(t) for t in ("90", "90s", "15m", "2h", "1.5d")] == [
        90,
        90,
        900,
        7_200,
        129_600,
    ]
    assert [cli.format_age(s) for s in (0, 45, 725, 12_000, 190_000)] == [
        "0s",
        "45s",
        "12m 5s",
        "3h 20m",
        "2d 4h",
    ]


RECONCILE_KINDS = {
    "complete-executing-from-a-file": (Status.EXECUTING, ["--complete", "FILE"], "completed"),
    "complete-uncertain-from-stdin": (Status.UNCERTAIN, ["--complete", "-"], "completed"),
    "complete-with-an-error": (
        Status.EXECUTING,
        ["--complete-error", "ToolOutcomeLost"],
        "completed",
    ),
    "mark-uncertain": (Status.EXECUTING, ["--mark-uncertain", "worker died"], "uncertain"),
    "release": (Status.DELIVERING, ["--release-delivery"], "completed"),
    "confirm": (Status.DELIVERING, ["--confirm-delivery"], "delivered"),
}
FOUND = {"messageId": "found-in-the-mail-log"}


def _action(action: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The action's arguments, with FILE written and stdin fed the found result."""
    found = tmp_path / "found.json"
    found.write_text(json.dumps(FOUND), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(FOUND)))
    return [str(found) if part == "FILE" else part for part in action]


@pytest.mark.parametrize("kind", list(RECONCILE_KINDS.values()), ids=list(RECONCILE_KINDS))
def test_reconcile_takes_each_kind_by_cas_on_sqlite(
    kind: tuple[Status, list[str], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source, action, target = kind
    url = _stuck_sqlite(tmp_path, source)
    revision = _stored(url)["revision"]
    arguments = ["reconcile", url, STUCK_KEY, "--revision", str(revision)]
    assert cli.main([*arguments, *_action(action, tmp_path, monkeypatch)]) == 0
    out = capsys.readouterr().out
    assert f"{source} at revision {revision} -> {target} at revision {revision + 1}" in out
    assert "(written)" in out
    assert PAYLOAD not in out
    assert FOUND["messageId"] not in out
    stored = _stored(url)
    assert (stored["status"], stored["revision"]) == (target, revision + 1)
    if action[0] == "--complete":
        assert stored["result"]["payload"] == FOUND
    if action[0] == "--complete-error":
        assert stored["result"]["payload"] == {"error": {"type": "ToolOutcomeLost"}}
    if action[0] == "--mark-uncertain":
        assert stored["execution"]["uncertain"]["reason"] == "worker died"


@pytest.mark.parametrize("kind", list(RECONCILE_KINDS.values()), ids=list(RECONCILE_KINDS))
def test_reconcile_dry_run_shows_the_next_record_and_writes_nothing(
    kind: tuple[Status, list[str], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source, action, target = kind
    url = _stuck_sqlite(tmp_path, source)
    before = _stored(url)
    arguments = ["reconcile", url, STUCK_KEY, "--revision", str(before["revision"]), "--dry-run"]
    assert cli.main([*arguments, *_action(action, tmp_path, monkeypatch), "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["written"] is False
    assert (shown["record"]["status"], shown["record"]["revision"]) == (
        target,
        before["revision"] + 1,
    )
    assert _stored(url) == before


@pytest.mark.parametrize("kind", list(RECONCILE_KINDS.values()), ids=list(RECONCILE_KINDS))
def test_reconcile_refuses_a_revision_that_moved(
    kind: tuple[Status, list[str], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source, action, _ = kind
    url = _stuck_sqlite(tmp_path, source)
    before = _stored(url)
    seen = str(before["revision"] - 1)
    arguments = ["reconcile", url, STUCK_KEY, "--revision", seen]
    assert cli.main([*arguments, *_action(action, tmp_path, monkeypatch)]) == 7
    assert "moved" in capsys.readouterr().err
    assert _stored(url) == before


@pytest.mark.parametrize(
    ("status", "action"),
    [
        (Status.COMPLETED, ["--complete-error", "X"]),
        (Status.DELIVERING, ["--mark-uncertain", "dead"]),
        (Status.UNCERTAIN, ["--mark-uncertain", "dead"]),
        (Status.EXECUTING, ["--release-delivery"]),
        (Status.DELIVERED, ["--confirm-delivery"]),
    ],
)
def test_reconcile_from_a_status_that_does_not_allow_it_exits_8(
    status: Status, action: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _stuck_sqlite(tmp_path, status)
    before = _stored(url)
    arguments = ["reconcile", url, STUCK_KEY, "--revision", str(before["revision"]), *action]
    assert cli.main(arguments) == cli.Exit.NOT_ALLOWED
    assert "INVALID_TRANSITION" in capsys.readouterr().err
    assert _stored(url) == before


@pytest.mark.parametrize(
    ("action", "said"),
    [
        (["--complete", "-"], "JSON"),  # stdin holds no JSON
        (["--complete-error", ""], "INVALID_ARGUMENT"),
        (["--mark-uncertain", "a\nb"], "INVALID_ARGUMENT"),
    ],
)
def test_reconcile_refuses_a_bad_action_before_the_store_changes(
    action: list[str],
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = _stuck_sqlite(tmp_path, Status.EXECUTING)
    before = _stored(url)
    monkeypatch.setattr(sys, "stdin", io.StringIO(f"not json {PAYLOAD}"))
    arguments = ["reconcile", url, STUCK_KEY, "--revision", "2", *action]
    assert cli.main(arguments) == 2
    err = capsys.readouterr().err
    assert said in err
    assert PAYLOAD not in err
    assert _stored(url) == before


def test_reconcile_refuses_a_found_result_over_the_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _stuck_sqlite(tmp_path, Status.EXECUTING)
    big = tmp_path / "big.json"
    big.write_text(json.dumps("x" * 100), encoding="utf-8")
    arguments = ["reconcile", url, STUCK_KEY, "--revision", "2", "--complete", str(big)]
    assert cli.main([*arguments, "--max-payload-bytes", "50"]) == 2
    assert "PAYLOAD_LIMIT_EXCEEDED" in capsys.readouterr().err
    assert cli.main([*arguments, "--max-payload-bytes", "200"]) == 0


def test_reconcile_needs_exactly_one_action(tmp_path: Path) -> None:
    url = _stuck_sqlite(tmp_path, Status.DELIVERING)
    for actions in ([], ["--release-delivery", "--confirm-delivery"]):
        with pytest.raises(SystemExit) as caught:
            cli.main(["reconcile", url, STUCK_KEY, "--revision", "4", *actions])
        assert caught.value.code == 2


# --- a newcomer's first minutes ----------------------------------------------------------------


def _cli(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tool_execution_checkpoint", *arguments],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        timeout=300,
    )


def test_inspect_on_a_sqlite_store_file_says_what_it_is_without_a_traceback(
    tmp_path: Path,
) -> None:
    _stuck_sqlite(tmp_path, Status.EXECUTING)
    run = _cli("inspect", "stuck.db", cwd=tmp_path)
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
    assert "stuck.db is a SQLite store, not a JSON record" in run.stderr
    assert "list sqlite:stuck.db" in run.stderr


def test_inspect_on_bytes_that_are_not_utf8_is_an_invalid_record(tmp_path: Path) -> None:
    (tmp_path / "junk").write_bytes(b"\xf8\xff{not json")
    run = _cli("inspect", "junk", cwd=tmp_path)
    assert run.returncode == 3
    assert "Traceback" not in run.stderr
    assert "invalid: INVALID_CHECKPOINT" in run.stdout


def test_the_demo_refuses_an_existing_file_and_says_why(tmp_path: Path) -> None:
    assert _cli("demo", "--path", "demo.db", cwd=tmp_path).returncode == 0
    before = (tmp_path / "demo.db").read_bytes()
    again = _cli("demo", "--path", "demo.db", cwd=tmp_path)
    assert again.returncode == 2
    assert "ran more than once" not in again.stderr
    assert "demo.db exists" in again.stderr
    assert "earlier demo" in again.stderr
    assert (tmp_path / "demo.db").read_bytes() == before


def test_the_demo_says_its_default_file_is_temporary_and_a_given_one_is_kept(
    tmp_path: Path,
) -> None:
    run = _cli("demo", cwd=tmp_path)
    assert run.returncode == 0
    assert "a temporary file, deleted when the demo ends" in run.stdout
    path = re.search(r"SQLiteStore at (\S+)", run.stdout)
    assert path is not None
    assert not Path(path.group(1)).exists()
    kept = _cli("demo", "--path", "kept.db", cwd=tmp_path)
    assert "kept afterwards" in kept.stdout
    assert "tool-checkpoint show sqlite:kept.db tec1-" in kept.stdout
    assert (tmp_path / "kept.db").exists()


def test_list_on_a_missing_file_is_refused_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.db"
    assert cli.main(["list", f"sqlite://{missing}"]) == 4
    assert "no SQLite file" in capsys.readouterr().err
    assert not missing.exists()
    assert cli.main(["list", "missing.db"]) == 2
    refused = capsys.readouterr().err
    assert "sqlite:PATH" in refused
    assert "missing.db" not in refused  # an argument is never echoed: it may be a secret


def test_a_relative_sqlite_url_is_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _stuck_sqlite(tmp_path, Status.EXECUTING)
    (tmp_path / "sub").mkdir()
    (tmp_path / "stuck.db").rename(tmp_path / "sub" / "stuck.db")
    monkeypatch.chdir(tmp_path)
    for url in (
        "sqlite:sub/stuck.db",
        "sqlite:./sub/stuck.db",
        "sqlite:sub/stuck.db?busy_timeout=1",
    ):
        assert cli.main(["list", url, "--format", "json"]) == 0, url
        assert [row["key"] for row in json.loads(capsys.readouterr().out)] == [STUCK_KEY]
    assert cli.main(["list", "sqlite://sub/stuck.db"]) == 2
    assert "sqlite:relative/path" in capsys.readouterr().err


def test_check_store_leaves_nothing_in_the_working_directory(tmp_path: Path) -> None:
    run = _cli(
        "check-store",
        "tool_execution_checkpoint.stores.memory:MemoryStore",
        "--examples",
        "2",
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert list(tmp_path.iterdir()) == []


def test_help_is_plain_text_and_lists_every_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    shown = capsys.readouterr().out
    assert "``" not in shown
    for code, meaning in cli.EXIT_MEANINGS.items():
        assert f"  {code.value}  " in shown
        assert " ".join(meaning.split()[:3]) in " ".join(shown.split())


def test_the_operators_page_documents_every_exit_code() -> None:
    page = Path(__file__).parents[1] / "docs" / "operators.md"
    text = " ".join(page.read_text("utf-8").split())
    for code, meaning in cli.EXIT_MEANINGS.items():
        assert f"| {code.value} | {meaning} |" in text, code


def test_every_public_name_the_docs_name_is_importable_from_the_package() -> None:
    """The README and the user's pages (each up to its part on how the code is built;
    the pages on the design name internals on purpose)."""
    root = Path(__file__).parents[1]
    design = {"guard.md", "protocol.md", "harness.md", "proofs.md", "api.md"}
    pages = [root / "README.md"]
    pages += [page for page in sorted((root / "docs").rglob("*.md")) if page.name not in design]
    named = set()
    for page in pages:
        text = page.read_text("utf-8")
        built = re.search(r"^## (How .* built|Where the code is)", text, flags=re.MULTILINE)
        named |= set(re.findall(r"`([A-Za-z_]\w*)", text[: built.start() if built else None]))
    package = importlib.import_module("tool_execution_checkpoint")
    core = "errors fingerprint records runner table transitions validation"
    core += " stores stores.core stores.memory stores.sqlite stores.opening"
    missing = [
        f"{module}.{name}"
        for module in core.split()
        for name in importlib.import_module(f"tool_execution_checkpoint.{module}").__all__
        if name in named and not hasattr(package, name)
    ]
    assert missing == []
    assert "default_error_payload" in package.__all__


@pytest.mark.parametrize(
    "stored",
    [
        '{"schemaVersion": 1, "revision": 2, "status": "executing"}',
        "not json \x00 s3cret-in-the-row",
        '{"schemaVersion": 9, "revision": 2}',
    ],
)
def test_a_broken_stored_record_is_an_invalid_record_for_show_and_reconcile(
    stored: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _stuck_sqlite(tmp_path, Status.EXECUTING)
    with sqlite3.connect(tmp_path / "stuck.db") as db:
        db.execute("UPDATE tec_checkpoint SET record = ?", (stored,))
    db.close()
    assert cli.main(["show", url, STUCK_KEY]) == cli.Exit.INVALID_RECORD
    arguments = ["reconcile", url, STUCK_KEY, "--revision", "2", "--mark-uncertain", "dead"]
    assert cli.main(arguments) == cli.Exit.INVALID_RECORD
    err = capsys.readouterr().err
    assert "s3cret" not in err
    assert STUCK_KEY not in err
    with sqlite3.connect(tmp_path / "stuck.db") as db:
        assert db.execute("SELECT record FROM tec_checkpoint").fetchone() == (stored,)
    db.close()


def test_inspect_reads_a_record_from_stdin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _stuck_sqlite(tmp_path, Status.EXECUTING)
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(_stored(url))))
    assert cli.main(["inspect", "-"]) == 0
    assert "status=executing" in capsys.readouterr().out


# --- no value in any exception chain; stores opened by the registry -------------------------


def test_a_found_result_that_is_not_json_leaves_no_text_in_the_chain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refusal once kept the JSONDecodeError, and with it the whole file, as its
    suppressed context; a file not in UTF-8 escaped as a UnicodeDecodeError."""
    deep = "[" * 100_000 + json.dumps(PAYLOAD) + "]" * 100_000
    files = {
        "torn.json": f'{{"found": "{PAYLOAD}'.encode(),
        "latin1.json": f'"{PAYLOAD} \xe9"'.encode("latin-1"),
        "deep.json": deep.encode(),
    }
    for name, data in files.items():
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(UsageError) as caught:
            operators._read_found(str(path))
        assert leaks(caught.value, PAYLOAD) is None, name
        assert caught.value.__context__ is None
    monkeypatch.setattr(sys, "stdin", io.StringIO(f"not json {PAYLOAD}"))
    with pytest.raises(UsageError) as caught:
        operators._read_found("-")
    assert leaks(caught.value, PAYLOAD) is None


def test_reconcile_refuses_a_found_result_not_in_utf8(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _stuck_sqlite(tmp_path, Status.EXECUTING)
    before = _stored(url)
    found = tmp_path / "found.json"
    found.write_bytes(b'{"found": "\xff' + PAYLOAD.encode() + b'"}')
    arguments = ["reconcile", url, STUCK_KEY, "--revision", "2", "--complete", str(found)]
    assert cli.main(arguments) == 2
    err = capsys.readouterr().err
    assert "JSON in UTF-8" in err
    assert PAYLOAD not in err
    assert _stored(url) == before


def test_a_url_the_store_cannot_use_keeps_no_password_in_the_chain() -> None:
    secret = "cli-chain-secret-93be"
    for url, refusal in (
        (f"redis://:{secret}@127.0.0.1:not-a-port/0", CheckpointError),
        (f"ftp://user:{secret}@example/x", UsageError),
        (f"sqlite://user:{secret}@host/x.db", CheckpointError),
    ):
        with pytest.raises(refusal) as caught:
            cli.open_store(url)
        assert leaks(caught.value, secret) is None, url


def test_the_commands_open_any_registered_store(capsys: pytest.CaptureFixture[str]) -> None:
    """The command line knows no dialect: a scheme registered with open_store's registry
    is listed, shown and refused like the built-in ones."""
    store = MemoryStore()
    binding = Binding("registered", "call-1", "tool", "1", "sha256:0")
    assert store.create_if_absent(
        checkpoint_key(binding), create_checkpoint(binding, created_at=AT)
    )
    register_store("test-cli", lambda _url: store, options=())
    try:
        assert cli.main(["list", "test-cli:", "--format", "json"]) == 0
        rows = json.loads(capsys.readouterr().out)
        assert [row["key"] for row in rows] == [checkpoint_key(binding)]
        assert cli.main(["show", "test-cli:", checkpoint_key(binding)]) == 0
        assert "status:" in capsys.readouterr().out
        assert cli.main(["list", "test-cli:", "--prefix", "p:"]) == 2
        assert "--prefix does not apply to a test-cli URL" in capsys.readouterr().err
    finally:
        _SCHEMES.pop("test-cli", None)
    assert cli.main(["list", "test-cli:"]) == 2
    assert "not a store URL" in capsys.readouterr().err


def test_commands_on_a_postgres_url_without_the_table_create_nothing(
    postgres_server: PostgresServer,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    """No command creates a store: on PostgreSQL, open_store's create=False is the store's
    create_table=False (it once reached no store, and list or show made the table on
    first use). Each command says there is no checkpoint table and exits as for a
    missing SQLite file."""
    url = postgres_server.url
    table = "cli_absent_table"  # nothing else makes it
    key = checkpoint_key(Binding("absent", "call-1", "tool", "1", "sha256:0"))

    def table_exists() -> bool:
        with psycopg.connect(postgres_server.admin_url, autocommit=True) as admin:
            row = admin.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()
        return bool(row and row[0])

    assert not table_exists()
    for command in (
        ["list", url],
        ["show", url, key],
        ["inspect", "--url", url, "--key", key],
        ["prune", url, "--retention", "0"],
        ["reconcile", url, key, "--revision", "1", "--confirm-delivery"],
    ):
        code = cli.main([*command, "--table", table])
        err = capsys.readouterr().err
        assert code == 4, (command, err)
        assert cli.Exit(code) is cli.Exit.STORE_FAILED
        assert f"there is no checkpoint table public.{table}" in err, err
        assert postgres_server.app_password not in err
        assert not table_exists(), command
