"""The delivered mark posted unanswered on a real Redis server.

``run_once`` sends its last write, the non-durable delivered mark, without waiting for
its reply where the store can (``post_compare_and_swap``): RedisStore sends ``CLIENT
REPLY SKIP`` and one EVAL in one buffer and reads nothing. Shown here: the mark lands and
the connection it went on is clean for the next call; the outcome says only what is
known (the delivering record, reason MARK_POSTED); a mark the server drops leaves the
record delivering, whose next call answers needs-delivery-reconciliation and never runs
the tool again; a server that refuses ``CLIENT REPLY`` (an ACL here) and a store made
with ``synchronous_delivered=True`` get the mark awaited, as before.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from redis_server import redis_url, server_for  # noqa: F401
from tool_execution_checkpoint import Binding, Status, checkpoint_key
from tool_execution_checkpoint.runner import (
    MARK_POSTED,
    RunStatus,
    run_once,
    run_once_async,
)
from tool_execution_checkpoint.stores import PostingStore
from tool_execution_checkpoint.stores.redis import AsyncRedisStore, RedisStore
from tool_execution_checkpoint.stores.redis.layout import Layout, Request


def _binding(call_id: str) -> Binding:
    return Binding("posting", call_id, "send_email", "1", "sha256:0")


def _stats(client: redis.Redis, command: str) -> int:
    stats: dict[str, Any] = client.info("commandstats")
    return int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))


@pytest.fixture
def store(redis_url: str) -> Iterator[RedisStore]:  # noqa: F811
    with RedisStore(redis_url, prefix=f"post{secrets.token_hex(4)}:") as opened:
        yield opened


def test_the_redis_stores_offer_posting() -> None:
    assert issubclass(RedisStore, PostingStore)
    assert issubclass(AsyncRedisStore, PostingStore)


def test_run_once_posts_the_mark_and_the_record_is_delivered(
    store: RedisStore,
    redis_url: str,  # noqa: F811
) -> None:
    checks = server_for(redis_url).client()
    skips, evals = _stats(checks, "client|reply"), _stats(checks, "eval")
    sent: list[object] = []
    outcome = run_once(store, _binding("c1"), lambda: {"id": 7}, sent.append)
    assert outcome.status is RunStatus.EXECUTED_AND_DELIVERED
    assert outcome.reason == MARK_POSTED
    assert outcome.record is not None
    assert outcome.record.status is Status.DELIVERING
    assert outcome.payload == {"id": 7}
    assert sent == [{"id": 7}]
    # the next operation goes on the same connection, after the mark: nothing unread
    stored = store.get(checkpoint_key(_binding("c1")))
    assert stored is not None
    assert stored["status"] == "delivered"
    # the store's first post tries CLIENT REPLY SKIP once; each mark is one more
    assert _stats(checks, "client|reply") == skips + 2
    assert _stats(checks, "eval") == evals + 1
    assert run_once(store, _binding("c2"), lambda: 2, sent.append).reason == MARK_POSTED
    assert _stats(checks, "client|reply") == skips + 3
    assert _stats(checks, "eval") == evals + 2
    again = run_once(store, _binding("c1"), lambda: pytest.fail("ran twice"), sent.append)
    assert again.status is RunStatus.ALREADY_DELIVERED
    assert sent == [{"id": 7}, 2]
    checks.close()


def test_run_once_async_posts_the_mark(redis_url: str) -> None:  # noqa: F811
    async def main() -> None:
        async with AsyncRedisStore(redis_url, prefix=f"post{secrets.token_hex(4)}:") as store:
            sent: list[object] = []
            for n in range(3):  # the connection stays clean call after call
                outcome = await run_once_async(store, _binding(f"a{n}"), _returns(n), sent.append)
                assert outcome.reason == MARK_POSTED
                stored = await store.get(checkpoint_key(_binding(f"a{n}")))
                assert stored is not None
                assert stored["status"] == "delivered"
            assert sent == [0, 1, 2]

    asyncio.run(main())


def test_a_lost_mark_leaves_delivering_and_the_tool_never_runs_again(
    store: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server drops the posted EVAL (a script that fails: its error reply is skipped
    too, as a lost connection would drop it): nothing tells the call."""
    real = Layout.posted_swap

    def failing(self: Layout, key: str, revision: int, record: Any) -> Request:
        request = real(self, key, revision, record)
        return Request((b"EVAL", b"error('lost')", *request.args[2:]), write=True)

    monkeypatch.setattr(Layout, "posted_swap", failing)
    runs: list[int] = []

    def tool() -> str:
        runs.append(1)
        return "r"

    outcome = run_once(store, _binding("lost"), tool, lambda _: None)
    assert outcome.status is RunStatus.EXECUTED_AND_DELIVERED
    assert outcome.reason == MARK_POSTED
    stored = store.get(checkpoint_key(_binding("lost")))
    assert stored is not None
    assert stored["status"] == "delivering"
    later = run_once(store, _binding("lost"), tool, lambda _: None)
    assert later.status is RunStatus.NEEDS_DELIVERY_RECONCILIATION
    assert runs == [1]


def test_a_refused_client_reply_gets_the_mark_awaited(redis_url: str) -> None:  # noqa: F811
    server = server_for(redis_url)
    admin: Any = server.client()
    password = secrets.token_hex(8)
    admin.execute_command(
        "ACL", "SETUSER", "noreply", "on", f">{password}", "~*", "+@all", "-client"
    )
    url = f"redis://noreply:{password}@{server.host}:{server.port}/0"
    try:
        with RedisStore(url, prefix=f"post{secrets.token_hex(4)}:") as store:
            for n in range(2):
                outcome = run_once(store, _binding(f"r{n}"), _returns(n), lambda _: None)
                assert outcome.status is RunStatus.EXECUTED_AND_DELIVERED
                assert outcome.reason is None
                assert outcome.record is not None
                assert outcome.record.status is Status.DELIVERED
    finally:
        admin.execute_command("ACL", "DELUSER", "noreply")
        admin.close()


def test_synchronous_delivered_awaits_the_mark(redis_url: str) -> None:  # noqa: F811
    prefix = f"post{secrets.token_hex(4)}:"
    with RedisStore(redis_url, prefix=prefix, synchronous_delivered=True) as store:
        outcome = run_once(store, _binding("s"), lambda: 1, lambda _: None)
    assert outcome.reason is None
    assert outcome.record is not None
    assert outcome.record.status is Status.DELIVERED


def _returns(value: int) -> Callable[[], int]:
    return lambda: value
