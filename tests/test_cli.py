"""The command line: the demo, the table, exit codes, check-store on factories and store
URLs (SQLite, and the test PostgreSQL and Redis servers), and the progress line."""

from __future__ import annotations

import io
import json
import re
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
from tool_execution_checkpoint import (
    TABLE,
    Binding,
    SQLiteStore,
    checkpoint_key,
    claim_execution,
    cli,
    create_checkpoint,
    run_once,
)
from tool_execution_checkpoint.postgres import PostgresStore
from tool_execution_checkpoint.progress import Progress, format_elapsed
from tool_execution_checkpoint.redis_store import RedisStore
from tool_execution_checkpoint.rendering import render_markdown, render_mermaid
from tool_execution_checkpoint.runner import RunOutcome, RunStatus


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

    monkeypatch.setattr(cli, "run_once", naive)
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
    factory = "tool_execution_checkpoint.memory:MemoryStore"
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


def _check_store(target: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(["check-store", target, "--examples", EXAMPLES])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_check_store_on_a_sqlite_url_uses_a_new_directory_and_removes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _filled_store(tmp_path / "s.db")
    before = sorted(path.name for path in tmp_path.iterdir())
    code, out, err = _check_store(url + "?busy_timeout=5", capsys)
    assert code == 0, out + err
    assert "the store passed every check" in out
    assert "ok    protocol_harness" in out
    assert "ok    list_records_matches_the_model" in out  # SQLiteStore lists: all checks
    assert f"deleted the directory {tmp_path}/.tec-check-" in out
    assert sorted(path.name for path in tmp_path.iterdir()) == before
    assert cli.main(["list", url, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert sorted(row["call_id"] for row in rows) == ["call-delivered", "call-stuck"]


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

    monkeypatch.setattr(cli, "_run_checks", interrupted)
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
    code, out, err = _check_store(url, capsys)
    assert code == 0, out + err
    assert "the store passed every check" in out
    assert re.search(r"dropped the \d+ tables public\.tec_check_[0-9a-f]{8}_N", out)
    assert postgres_server.app_password not in out + err
    assert _scratch_tables(postgres_server) == []
    with PostgresStore(url) as store:
        assert store.get(checkpoint_key(_user_binding())) == kept
        assert len(store.list_records(list(TABLE.statuses))) == 1


def test_check_store_on_a_redis_url_uses_new_prefixes_and_deletes_their_keys(
    redis_url: str,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    client = redis.Redis.from_url(redis_url)
    try:
        kept = _put_user_record(RedisStore.from_url(redis_url))
        keys_before = set(client.keys("*"))
        code, out, err = _check_store(redis_url, capsys)
        assert code == 0, out + err
        assert "the store passed every check" in out
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
