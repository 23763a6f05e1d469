"""RedisStore and AsyncRedisStore against a real redis-server started for the session
(appendonly yes, appendfsync always, a password): the conformance suite, listings held to
MemoryStore, one EVALSHA per write seen by MONITOR, exact round trips, ambiguous writes
resolved by reading back, bad configuration, the durability check and a kill storm."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Protocol, cast

import pytest
import redis
import redis.asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis._parsers.encoders import Encoder
from redis.backoff import NoBackoff
from redis.connection import PythonRespSerializer
from redis.retry import Retry

from faults import cancelled_while_returning
from redis_server import (  # noqa: F401
    RedisServer,
    RedisServerError,
    find_redis_server,
    free_port,
    redis_url,
    server_for,
    start_redis_server,
    stop_redis_server,
)
from strategies import checkpoints, identifier_chars, timestamps
from tool_execution_checkpoint import (
    Binding,
    Checkpoint,
    CheckpointError,
    ErrorCode,
    Listing,
    MemoryStore,
    OutcomeUnknownError,
    Status,
    StoreError,
    checkpoint_key,
    claim_delivery,
    claim_execution,
    complete_delivery,
    complete_execution,
    create_checkpoint,
    decide_checkpoint,
    mark_execution_uncertain,
    open_store,
    release_delivery,
    release_execution,
)
from tool_execution_checkpoint.records import StoredRecord
from tool_execution_checkpoint.stores import (
    AsyncCheckpointStore,
    BrokenRecord,
    OperableCheckpointStore,
    RecordSummary,
)
from tool_execution_checkpoint.stores.redis import (
    SCRIPTS,
    AsyncRedisStore,
    RedisAuthenticationError,
    RedisCommandError,
    RedisConfigurationError,
    RedisDurabilityError,
    RedisDurabilityWarning,
    RedisOutcomeUnknownError,
    RedisStore,
    RedisUnavailableError,
)
from tool_execution_checkpoint.stores.redis.layout import packed
from tool_execution_checkpoint.testing import (
    OperableStoreConformance,
    active_profile,
    read_back_landed,
)
from tool_execution_checkpoint.testing.listings import (
    check_paging,
    check_whole_listing,
    selected,
    timed,
)
from tool_execution_checkpoint.testing.processes import kill_storm
from tool_execution_checkpoint.validation import timestamp_microseconds

NOW = "2026-01-01T00:00:00Z"
LATER = "2026-01-01T00:00:05Z"


def fresh_prefix() -> str:
    return f"t-{uuid.uuid4().hex}:"


def binding(call_id: str = "call-1") -> Binding:
    return Binding("redis-tests", call_id, "tool", "1", "sha256:0")


def new_store(url: str, **options: Any) -> RedisStore:
    return RedisStore.from_url(url, prefix=fresh_prefix(), **options)


@pytest.fixture
def server(redis_url: str) -> RedisServer:  # noqa: F811
    return server_for(redis_url)


@pytest.fixture
def admin(server: RedisServer) -> Iterator[redis.Redis]:
    client = server.client()
    try:
        yield client
    finally:
        client.close()


def test_a_missing_redis_server_names_the_install_script(tmp_path: Path) -> None:
    with pytest.raises(RedisServerError, match=r"scripts/install-services\.sh"):
        find_redis_server(search_path=str(tmp_path), fallback=tmp_path / "redis-server")
    assert find_redis_server().endswith("redis-server")


# --- the conformance suite ---------------------------------------------------------------


class TestRedisStore(OperableStoreConformance):
    """Every store of a fresh prefix shares one client (the stores do not own it)."""

    store_clock = True

    @pytest.fixture(autouse=True)
    def _client(self, redis_url: str) -> Iterator[None]:  # noqa: F811
        self.client = redis.Redis.from_url(redis_url)
        yield
        self.client.close()

    def make_store(self) -> RedisStore:
        return RedisStore(self.client, prefix=fresh_prefix())

    def write_raw(self, store: RedisStore, key: str, raw: bytes) -> None:
        """The bytes as the hash's record field, indexed as delivered at the epoch."""
        name = store._layout.record_key(key)
        fields = {b"revision": b"1", b"status": b"delivered", b"updated_us": b"0", b"record": raw}
        self.client.hset(name, mapping=fields)  # type: ignore[arg-type]
        self.client.zadd(f"{store._layout.prefix}idx:delivered", {key: 0})


class TestAsyncRedisStore(OperableStoreConformance):
    """The asyncio store through the adapter; each store owns its client (built from the
    URL on the adapter's event loop's first use) and the harness closes it."""

    store_clock = True

    harness_examples = max(1, active_profile().max_examples // 3)

    @pytest.fixture(autouse=True)
    def _url(self, redis_url: str) -> None:  # noqa: F811
        self.url = redis_url

    def make_store(self) -> AsyncRedisStore:
        return AsyncRedisStore.from_url(self.url, prefix=fresh_prefix())

    def write_raw(self, store: AsyncRedisStore, key: str, raw: bytes) -> None:
        """As the sync suite's hook, with a sync client of the same server."""
        client = redis.Redis.from_url(self.url)
        try:
            TestRedisStore.write_raw(cast(Any, SimpleNamespace(client=client)), store, key, raw)  # type: ignore[arg-type]
        finally:
            client.close()


def test_the_stores_satisfy_the_protocols(redis_url: str) -> None:  # noqa: F811
    with new_store(redis_url) as store:
        assert isinstance(store, OperableCheckpointStore)
    assert isinstance(AsyncRedisStore.from_url(redis_url), AsyncCheckpointStore)
    assert isinstance(open_store(redis_url), RedisStore)  # the package's, by URL scheme


def test_a_read_hands_on_the_record_it_validated(redis_url: str) -> None:  # noqa: F811
    """get returns a StoredRecord: decide takes its record without validating it again."""
    created = create_checkpoint(binding(), created_at=NOW)
    prefix = fresh_prefix()
    with RedisStore.from_url(redis_url, prefix=prefix) as store:
        assert store.create_if_absent("k", created)
        stored = store.get("k")
    assert type(stored) is StoredRecord
    assert decide_checkpoint(stored, binding()).checkpoint is stored.checkpoint == created

    async def read() -> object:
        async with AsyncRedisStore.from_url(redis_url, prefix=prefix) as twin:
            return await twin.get("k")

    read_async = asyncio.run(read())
    assert type(read_async) is StoredRecord
    assert read_async.checkpoint == created


# --- records written through every transition, for listings and round trips ----------------


def walk(record: Checkpoint, status: Status, stamp: str, payload: Any) -> list[Checkpoint]:
    """Every record on the way from ``record`` (ready) to ``status``, first excluded."""
    steps: list[Callable[[Checkpoint], Checkpoint]] = []
    claim = [lambda r: claim_execution(r, attempt_id="attempt-1", at=stamp).next]
    complete = [
        *claim,
        lambda r: complete_execution(r, attempt_id="attempt-1", at=stamp, result=payload).next,
    ]
    deliver = [*complete, lambda r: claim_delivery(r, delivery_id="d-1", at=stamp).next]
    if status is Status.EXECUTING:
        steps = claim
    elif status is Status.RELEASED:
        steps = [*claim, lambda r: release_execution(r, attempt_id="attempt-1", at=stamp).next]
    elif status is Status.UNCERTAIN:
        steps = [
            *claim,
            lambda r: (
                mark_execution_uncertain(r, attempt_id="attempt-1", at=stamp, reason="timeout").next
            ),
        ]
    elif status is Status.COMPLETED:
        steps = [
            *deliver,
            lambda r: release_delivery(r, delivery_id="d-1", at=stamp).next,
        ]
    elif status is Status.DELIVERING:
        steps = deliver
    elif status is Status.DELIVERED:
        steps = [*deliver, lambda r: complete_delivery(r, delivery_id="d-1", at=stamp).next]
    path = []
    for step in steps:
        record = step(record)
        path.append(record)
    return path


def write_everywhere(
    stores: list[Any], key: str, status: Status, created: str, updated: str
) -> Checkpoint:
    record = create_checkpoint(binding(f"call-{key}"), created_at=created)
    for store in stores:
        assert store.create_if_absent(key, record) is True
    for following in walk(record, status, updated, {"key": key}):
        for store in stores:
            assert store.compare_and_swap(key, following.revision - 1, following) is True
        record = following
    return record


def index_of(admin: redis.Redis, store: RedisStore) -> dict[str, dict[str, float]]:
    """What the store's per-status indexes hold: status -> key -> score."""
    found = {}
    for status in Status:
        index = f"{store.prefix}idx:{status.value}"
        raw = cast(list[tuple[bytes, float]], admin.zrange(index, 0, -1, withscores=True))
        found[status.value] = {member.decode(): score for member, score in raw}
    return found


listing_keys = st.lists(
    st.text(identifier_chars, min_size=1, max_size=6) | st.sampled_from(["a", "b", "ab", "é"]),
    min_size=1,
    max_size=10,
    unique=True,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    keys=listing_keys,
)
def test_list_records_answers_as_memory_store_does(
    redis_url: str,  # noqa: F811
    data: st.DataObject,
    keys: list[str],
) -> None:
    server = server_for(redis_url)
    admin = server.client()
    store = new_store(redis_url)
    model = MemoryStore()
    try:
        written = {}
        start = store.clock_us()
        for key in keys:
            status = data.draw(st.sampled_from(list(Status)))
            stamp = data.draw(timestamps())
            written[key] = write_everywhere([store, model], key, status, NOW, stamp)
        end = store.clock_us()
        # The index holds each key once, under its status, scored by the server's TIME
        # of its last write (whatever the record's stamp), which the listing shows.
        index = index_of(admin, store)
        reference = check_whole_listing(store, model)
        for line in reference:
            assert isinstance(line, RecordSummary)
            record = written[line.key]
            for status in Status:
                assert (line.key in index[status.value]) == (status is record.status)
            score = index[record.status.value][line.key]
            assert start <= score <= end
            assert score == line.written_us
        instants = sorted(index[written[key].status.value][key] for key in keys)
        bounds = (
            st.none() | st.sampled_from([int(i) for i in instants]) | st.integers(-(2**62), 2**62)
        )
        for _ in range(4):
            statuses = data.draw(st.sets(st.sampled_from(list(Status))))
            before = data.draw(bounds)
            if before is not None and data.draw(st.booleans()):
                before += data.draw(st.sampled_from([-1, 1]))
            after = data.draw(
                st.none()
                | st.sampled_from(sorted(keys))
                | st.text(identifier_chars, min_size=1, max_size=3)
            )
            limit = data.draw(st.integers(1, 12))
            listing = Listing(statuses, written_before_us=before, after_key=after, limit=limit)
            assert timed(store.list_records(listing)) == timed(selected(reference, listing))
            # Paging through everything gives the whole answer, page by page.
            check_paging(store, reference, statuses, before, limit)
    finally:
        store.close()
        admin.close()


def test_list_records_is_exact_at_microsecond_bounds_past_double_precision(
    redis_url: str,  # noqa: F811
) -> None:
    """Scores are doubles (exact to 2^53 us, about the year 2255): an earlier version
    scored keys by their records' stamps, and two stamped one microsecond apart in the
    year 9999 share a score. The listing reads each as the one time the score holds and
    compares that exactly, so listings and written_us agree."""
    server = server_for(redis_url)
    admin = server.client()
    store = new_store(redis_url)
    stamps = ["9999-12-31T23:59:59.999998Z", "9999-12-31T23:59:59.999999Z"]
    for number, stamp in enumerate(stamps):
        write_everywhere([store], f"k{number}", Status.EXECUTING, NOW, stamp)
        admin.zadd(f"{store.prefix}idx:executing", {f"k{number}": timestamp_microseconds(stamp)})
    last = timestamp_microseconds(stamps[1])
    assert float(last) == float(last - 1)
    held = int(float(last))
    assert [store.written_us(f"k{number}") for number in range(2)] == [held, held]
    for bound, count in ((held, 0), (held + 1, 2), (2**63 - 1, 2)):
        assert (
            len(store.list_records(Listing([Status.EXECUTING], written_before_us=bound))) == count
        )
    store.close()
    admin.close()


def test_list_records_refuses_what_is_not_a_listing_before_any_command() -> None:
    # Nothing listens on the port: had a command been sent, this would be a StoreError.
    store = RedisStore.from_url(f"redis://127.0.0.1:{free_port()}/0")
    for wrong in ("ready", [Status.READY], None, (frozenset(Status), None, None, 1)):
        for target in (store, MemoryStore()):
            with pytest.raises(CheckpointError) as caught:
                target.list_records(wrong)  # type: ignore[arg-type]
            assert (caught.value.code, caught.value.field) == (
                ErrorCode.INVALID_ARGUMENT,
                "listing",
            )
    assert store.list_records(Listing([])) == []
    store.close()


def test_the_async_store_lists_as_the_sync_store_does(redis_url: str) -> None:  # noqa: F811
    prefix = fresh_prefix()
    store = RedisStore.from_url(redis_url, prefix=prefix)
    for number, status in enumerate(Status):
        write_everywhere([store], f"k{number}", status, NOW, f"2026-01-0{number + 1}T00:00:00Z")
    fifth = store.written_us("k4")  # written in key order: before it are k0 to k3
    assert fifth is not None
    wanted = [Status.EXECUTING, Status.DELIVERING, Status.DELIVERED]

    async def listing() -> list[RecordSummary | BrokenRecord]:
        async with AsyncRedisStore.from_url(redis_url, prefix=prefix) as twin:
            assert await twin.written_us("k4") == fifth
            assert await twin.clock_us() > fifth
            return await twin.list_records(
                Listing(wanted, written_before_us=fifth + 1, after_key="k1", limit=5)
            )

    got = asyncio.run(listing())
    expected = [
        f"k{number}" for number, status in enumerate(Status) if status in wanted and 1 < number < 5
    ]
    assert expected
    assert [summary.key for summary in got] == expected
    again = store.list_records(
        Listing(wanted, written_before_us=fifth + 1, after_key="k1", limit=5)
    )
    assert timed(got) == timed(again)
    store.close()


# --- atomicity: one command per operation, seen by the server --------------------------------


class _Monitor(Protocol):
    """redis-py's Monitor (untyped), as far as the tests use it."""

    def __enter__(self) -> _Monitor: ...

    def __exit__(self, *exc_info: object) -> None: ...

    def next_command(self) -> dict[str, Any]: ...


def monitored(server: RedisServer, action: Callable[[], object]) -> list[dict[str, Any]]:
    """The commands the server ran while ``action`` ran (MONITOR), between two markers
    sent from a separate client."""
    watcher = redis.Redis(host=server.host, port=server.port, password=server.password, protocol=2)
    marker = server.client()
    seen: list[dict[str, Any]] = []
    with cast(Callable[[], _Monitor], watcher.monitor)() as monitor:
        marker.echo("start-marker")
        while "start-marker" not in monitor.next_command()["command"]:
            pass
        action()
        marker.echo("end-marker")
        while True:
            command = monitor.next_command()
            if "end-marker" in command["command"]:
                break
            seen.append(command)
    marker.close()
    watcher.close()
    return seen


def top_level(commands: list[dict[str, Any]]) -> list[str]:
    return [c["command"].split(" ")[0].upper() for c in commands if c["client_type"] != "lua"]


def from_scripts(commands: list[dict[str, Any]]) -> list[str]:
    return [c["command"].split(" ")[0].upper() for c in commands if c["client_type"] == "lua"]


def test_each_operation_is_one_command_and_a_cas_is_one_evalsha(
    server: RedisServer,
    admin: redis.Redis,
    redis_url: str,  # noqa: F811
) -> None:
    store = new_store(redis_url)
    key = checkpoint_key(binding())
    created = create_checkpoint(binding(), created_at=NOW)
    store.get(key)  # the connection is made (AUTH, HELLO) before anything is watched
    claim = claim_execution(created, attempt_id="attempt-1", at=LATER)

    create = monitored(server, lambda: store.create_if_absent(key, created))
    assert top_level(create) == ["EVALSHA"]
    # The index is written first: a foreign value there fails the script before any write.
    assert from_scripts(create) == ["EXISTS", "TIME", "ZADD", "HSET"]  # the server's time

    stats_before = admin.info("commandstats")
    swap = monitored(server, lambda: store.compare_and_swap(key, 1, claim.next))
    stats_after = admin.info("commandstats")
    assert top_level(swap) == ["EVALSHA"]
    # One check, of the old status's index, the one written after the first write.
    assert from_scripts(swap) == ["HMGET", "TYPE", "TIME", "ZADD", "ZREM", "HSET"]
    assert stats_after["cmdstat_evalsha"]["calls"] == stats_before["cmdstat_evalsha"]["calls"] + 1
    for name in ("cmdstat_multi", "cmdstat_exec", "cmdstat_watch", "cmdstat_set", "cmdstat_get"):
        assert stats_after.get(name) == stats_before.get(name)

    lost = monitored(server, lambda: store.compare_and_swap(key, 1, claim.next))
    assert top_level(lost) == ["EVALSHA"]
    assert from_scripts(lost) == ["HMGET"]  # a lost CAS writes nothing

    raw = claim.next.to_dict()
    kept = Checkpoint.from_dict({**raw, "revision": 3})  # its status kept: one index
    same = monitored(server, lambda: store.compare_and_swap(key, 2, kept))
    assert from_scripts(same) == ["HMGET", "TIME", "ZADD", "HSET"]

    read = monitored(server, lambda: store.get(key))
    assert top_level(read) == ["HGET"]
    store.close()


def test_a_flushed_script_cache_costs_one_script_load_and_nothing_else(
    server: RedisServer,
    admin: redis.Redis,
    redis_url: str,  # noqa: F811
) -> None:
    store = new_store(redis_url)
    key = checkpoint_key(binding())
    created = create_checkpoint(binding(), created_at=NOW)
    store.create_if_absent(key, created)
    admin.script_flush()  # what a restart or a failover does to the script cache
    claim = claim_execution(created, attempt_id="attempt-1", at=LATER)
    swap = monitored(server, lambda: store.compare_and_swap(key, 1, claim.next))
    assert top_level(swap) == ["EVALSHA", "SCRIPT", "EVALSHA"]
    assert store.get(key) == claim.next.to_dict()

    async def async_twin() -> bool:
        async with AsyncRedisStore.from_url(redis_url, prefix=store.prefix) as twin:
            done = complete_execution(claim.next, attempt_id="attempt-1", at=LATER, result=1)
            return await twin.compare_and_swap(key, 2, done.next)

    admin.script_flush()
    assert asyncio.run(async_twin()) is True
    store.close()


# A command: its name (redis-py would split one holding a space, and none does), then
# any bytes at all, empty, binary or past redis-py's 6,000-byte cutoff.
_COMMANDS = st.tuples(
    st.binary(min_size=1, max_size=16).filter(lambda name: b" " not in name),
    st.lists(st.binary(max_size=9000), max_size=20),
).map(lambda command: [command[0], *command[1]])


@settings(max_examples=300)
@given(st.lists(_COMMANDS, min_size=1, max_size=4))
def test_commands_are_packed_as_redis_py_packs_them(commands: list[list[bytes]]) -> None:
    """The store packs its commands itself (their arguments are bytes already): the
    bytes on the wire are those of redis-py's own packer."""
    packer: Any = PythonRespSerializer(6000, cast(Any, Encoder)("utf-8", "strict", False).encode)
    expected = b"".join(b"".join(packer.pack(*command)) for command in commands)
    assert packed(*commands) == (expected,)


# --- exact round trips --------------------------------------------------------------------

TRICKY_PAYLOADS: list[Any] = [
    {"nul": "\u0000", "line separators": "\u2028\u2029", "astral": "\U0001f600\U0010ffff"},
    {"numbers": [1e308, -0.0, 5e-324, 2**70, -(2**63), 0.1, 1.0, 123456789.123456789]},
    {"escapes": '"\\/\b\f\n\r\t', "bom": "\ufeff", "bidi": "\u202e", "combining": "e\u0301"},
    {"": "empty key", "duplicate-looking": {"a": 1, "A": 2}, "nested": [[[[[]]]]], "n": None},
    ["a list at the top", True, False, None, {}, []],
    "a bare string with \u00e9 and \u4e2d\u6587",
    -0.0,
]


@pytest.mark.parametrize("payload", TRICKY_PAYLOADS)
def test_tricky_payloads_read_back_byte_for_byte(
    admin: redis.Redis,
    redis_url: str,  # noqa: F811
    payload: Any,
) -> None:
    store = new_store(redis_url)
    key = "ключ-\u00e9-\U0001f511"
    created = create_checkpoint(binding(), created_at=NOW)
    store.create_if_absent(key, created)
    claim = claim_execution(created, attempt_id="attempt-\u00e9", at=NOW)
    done = complete_execution(claim.next, attempt_id="attempt-\u00e9", at=LATER, result=payload)
    assert store.compare_and_swap(key, 1, claim.next)
    assert store.compare_and_swap(key, 2, done.next)
    raw = admin.hget(f"{store.prefix}rec:{key}", "record")
    assert raw == done.next.to_json().encode("utf-8")
    stored = store.get(key)
    assert stored == done.next.to_dict()
    # Text equality also tells -0.0 from 0.0 and 1e308 from a 309-digit integer.
    assert json.dumps(stored, ensure_ascii=False, separators=(",", ":")) == done.next.to_json()
    assert Checkpoint.from_dict(stored).result == done.next.result
    store.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record=checkpoints())
def test_any_record_reads_back_exactly(redis_url: str, record: Checkpoint) -> None:  # noqa: F811
    store = new_store(redis_url)
    first = create_checkpoint(record.binding, created_at=record.created_at)
    assert store.create_if_absent("k", first)
    if record.revision > 1:
        # Swap in the drawn record directly: the store checks the revision, not the path.
        assert store.compare_and_swap("k", 1, _at_revision(record, 2))
        assert store.get("k") == _at_revision(record, 2).to_dict()
    else:
        assert store.get("k") == record.to_dict()
    store.close()


def _at_revision(record: Checkpoint, revision: int) -> Checkpoint:
    raw = record.to_dict()
    raw["revision"] = revision
    return Checkpoint.from_dict(raw, max_payload_bytes=10_485_760)


def test_a_stored_value_the_store_did_not_write_is_an_error_without_its_content(
    admin: redis.Redis,
    redis_url: str,  # noqa: F811
) -> None:
    store = new_store(redis_url)
    secret = "a-payload-that-must-not-appear"
    admin.set(f"{store.prefix}rec:k", secret)
    with pytest.raises(RedisCommandError) as caught:
        store.get("k")
    assert caught.value.code == "WRONGTYPE"
    assert secret not in str(caught.value)
    record = create_checkpoint(binding(), created_at=NOW)
    assert store.create_if_absent("k", record) is False
    claim = claim_execution(record, attempt_id="a", at=NOW)
    with pytest.raises(RedisCommandError):
        store.compare_and_swap("k", 1, claim.next)
    assert admin.get(f"{store.prefix}rec:k") == secret.encode()
    # A foreign value at an index key: the scripts refuse before writing anything.
    admin.set(f"{store.prefix}idx:executing", secret)
    assert store.create_if_absent("i", record) is True
    with pytest.raises(RedisCommandError) as refused:
        store.compare_and_swap("i", 1, claim.next)
    assert refused.value.code == "WRONGTYPE"
    assert store.get("i") == record.to_dict()
    assert store.list_records(Listing([Status.READY])) == [RecordSummary.of("i", record)]
    admin.set(f"{store.prefix}idx:ready", secret)
    with pytest.raises(RedisCommandError):
        store.create_if_absent("h", record)
    assert store.get("h") is None
    admin.hset(f"{store.prefix}rec:j", "record", "{not json")
    with pytest.raises(CheckpointError) as invalid:
        store.get("j")
    assert invalid.value.code is ErrorCode.INVALID_CHECKPOINT
    store.close()


# --- ambiguous writes ----------------------------------------------------------------------


class DroppingProxy:
    """A loopback TCP proxy to the Redis server. When armed, it forwards the next
    request, swallows the server's reply (the write was applied) and closes the client's
    connection: the reply is lost, as when a network drops it."""

    def __init__(self, server: RedisServer) -> None:
        self.upstream = (server.host, server.port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.armed = threading.Event()
        self.dropped = threading.Event()
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, password: str) -> str:
        return f"redis://:{password}@127.0.0.1:{self.port}/0"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.upstream)
            self.sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, replies: bool) -> None:
        while True:
            try:
                data = source.recv(65_536)
            except OSError:
                return
            if not data:
                _hang_up(target)
                return
            if replies and self.armed.is_set():
                self.armed.clear()
                self.dropped.set()
                _hang_up(target)  # the client never sees the reply
                _hang_up(source)
                return
            try:
                target.sendall(data)
            except OSError:
                return

    def close(self) -> None:
        _hang_up(self.listener)
        for each in self.sockets:
            _hang_up(each)


def _hang_up(connection: socket.socket) -> None:
    """Close a socket another thread may be reading: shutdown first, so the peer sees
    the end at once and the reading thread wakes up."""
    with contextlib.suppress(OSError):
        connection.shutdown(socket.SHUT_RDWR)
    connection.close()


@pytest.fixture
def proxy(server: RedisServer) -> Iterator[DroppingProxy]:
    relay = DroppingProxy(server)
    try:
        yield relay
    finally:
        relay.close()


def test_a_cas_whose_reply_is_lost_is_an_unknown_outcome_resolved_by_reading_back(
    server: RedisServer,
    proxy: DroppingProxy,
    redis_url: str,  # noqa: F811
) -> None:
    prefix = fresh_prefix()
    through_proxy = RedisStore.from_url(proxy.url(server.password), prefix=prefix)
    direct = RedisStore.from_url(redis_url, prefix=prefix)
    key = checkpoint_key(binding())
    created = create_checkpoint(binding(), created_at=NOW)
    assert through_proxy.create_if_absent(key, created)
    claim = claim_execution(created, attempt_id="attempt-1", at=LATER)
    proxy.armed.set()
    with pytest.raises(RedisOutcomeUnknownError) as caught:
        through_proxy.compare_and_swap(key, 1, claim.next)
    assert proxy.dropped.is_set()
    assert isinstance(caught.value, OutcomeUnknownError)
    assert "read the record back" in str(caught.value)
    assert server.password not in str(caught.value)
    # Reading back tells exactly: the record is the one this attempt wrote.
    assert read_back_landed(direct, key, claim.next) is True
    rival = claim_execution(created, attempt_id="attempt-2", at=LATER)
    assert read_back_landed(direct, key, rival.next) is False
    # A blind retry would have been told False: it must never decide anything.
    assert through_proxy.compare_and_swap(key, 1, claim.next) is False
    through_proxy.close()
    direct.close()


def test_a_cas_on_a_killed_connection_is_an_unknown_outcome_and_reads_back_unapplied(
    admin: redis.Redis,
    redis_url: str,  # noqa: F811
) -> None:
    """CLIENT PAUSE WRITE holds the EVALSHA in flight; CLIENT KILL drops its connection
    before it runs. The store cannot know that: OutcomeUnknownError; reading back shows
    the old record, and the attempt may claim again."""
    store = new_store(redis_url)
    key = checkpoint_key(binding())
    created = create_checkpoint(binding(), created_at=NOW)
    store.create_if_absent(key, created)
    connection_id = store.client.client_id()  # the pool's one connection, reused next
    claim = claim_execution(created, attempt_id="attempt-1", at=LATER)
    outcome: dict[str, object] = {}

    def swap() -> None:
        try:
            outcome["answer"] = store.compare_and_swap(key, 1, claim.next)
        except StoreError as error:
            outcome["error"] = error

    admin.client_pause(5000, all=False)  # CLIENT PAUSE 5000 WRITE
    try:
        worker = threading.Thread(target=swap)
        worker.start()
        deadline = time.monotonic() + 3
        while not any(
            c["id"] == str(connection_id) and c["cmd"] == "evalsha" for c in admin.client_list()
        ):
            assert time.monotonic() < deadline, "the CAS never reached the server"
            time.sleep(0.01)
        admin.client_kill_filter(_id=str(connection_id))
        worker.join(5)
    finally:
        admin.client_unpause()
    assert isinstance(outcome.get("error"), RedisOutcomeUnknownError), outcome
    assert store.get(key) == created.to_dict()
    assert read_back_landed(store, key, claim.next) is False
    assert store.compare_and_swap(key, 1, claim.next) is True
    store.close()


def test_a_write_that_times_out_after_sending_is_an_unknown_outcome(
    admin: redis.Redis,
    redis_url: str,  # noqa: F811
) -> None:
    store = new_store(redis_url, socket_timeout=0.3)
    key = checkpoint_key(binding())
    created = create_checkpoint(binding(), created_at=NOW)
    store.create_if_absent(key, created)
    claim = claim_execution(created, attempt_id="attempt-1", at=LATER)
    admin.client_pause(2000, all=False)
    try:
        started = time.monotonic()
        with pytest.raises(RedisOutcomeUnknownError, match="no answer within"):
            store.compare_and_swap(key, 1, claim.next)
        assert time.monotonic() - started < 1.5
        # A read is not paused, and a read that fails is never an unknown outcome.
        assert store.get(key) == created.to_dict()
    finally:
        admin.client_unpause()
    stored = store.get(key)
    assert stored in (created.to_dict(), claim.next.to_dict())  # one or the other, whole
    store.close()


def test_the_async_store_reports_a_lost_reply_as_an_unknown_outcome(
    server: RedisServer, proxy: DroppingProxy
) -> None:
    prefix = fresh_prefix()
    key = checkpoint_key(binding())
    created = create_checkpoint(binding(), created_at=NOW)
    claim = claim_execution(created, attempt_id="attempt-1", at=LATER)

    async def scenario() -> None:
        async with AsyncRedisStore.from_url(proxy.url(server.password), prefix=prefix) as store:
            assert await store.create_if_absent(key, created)
            proxy.armed.set()
            with pytest.raises(RedisOutcomeUnknownError):
                await store.compare_and_swap(key, 1, claim.next)
            assert await store.get(key) == claim.next.to_dict()

    asyncio.run(scenario())


def test_a_cancelled_async_write_is_resolved_by_reading_back(
    admin: redis.Redis,
    redis_url: str,  # noqa: F811
) -> None:
    """Cancelling a write in flight raises CancelledError, not a store error: the caller
    must treat it as an unknown outcome. The connection is dropped, never reused with a
    reply pending, and reading back tells what happened."""
    prefix = fresh_prefix()
    key = checkpoint_key(binding())
    created = create_checkpoint(binding(), created_at=NOW)
    claim = claim_execution(created, attempt_id="attempt-1", at=LATER)

    async def scenario() -> None:
        async with AsyncRedisStore.from_url(redis_url, prefix=prefix) as store:
            assert await store.create_if_absent(key, created)
            admin.client_pause(5000, all=False)
            try:
                task = asyncio.ensure_future(store.compare_and_swap(key, 1, claim.next))
                await asyncio.sleep(0.2)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            finally:
                admin.client_unpause()
            stored = await store.get(key)  # the pool still works
            assert stored in (created.to_dict(), claim.next.to_dict())
            landed = stored == claim.next.to_dict()
            # Decided by what was read back: claim again only if the claim did not land.
            assert await store.compare_and_swap(key, 1, claim.next) is (not landed)

    asyncio.run(scenario())


def test_a_cancellation_during_the_connections_return_does_not_keep_it_out_of_the_pool(
    redis_url: str,  # noqa: F811
) -> None:
    """A cancellation that lands while the store gives its connection back (a second
    one, while the first unwinds) does not stop the return: the pool gets it back."""
    key = checkpoint_key(binding())

    async def scenario() -> None:
        async with AsyncRedisStore.from_url(redis_url, prefix=fresh_prefix()) as store:
            pool: Any = store._pool
            returned = await cancelled_while_returning(pool, "release", lambda: store.get(key))
            assert len(returned) == 1
            assert not pool._in_use_connections
            assert await store.get(key) is None

    asyncio.run(scenario())


def test_a_client_with_retries_still_sends_each_write_once(
    server: RedisServer, proxy: DroppingProxy
) -> None:
    """redis-py retries commands on a dropped connection by default (3 times since 6.0).
    Run through redis-py's Script, a CAS whose reply is lost is sent again and answers 0
    although it landed: a won claim reported lost. The store sends it once and says
    the outcome is unknown."""
    client = redis.Redis.from_url(
        proxy.url(server.password), retry=Retry(NoBackoff(), 3)
    )  # what an application passes in
    prefix = fresh_prefix()
    store = RedisStore(client, prefix=prefix)
    key = checkpoint_key(binding())
    created = create_checkpoint(binding(), created_at=NOW)
    assert store.create_if_absent(key, created)
    claim = claim_execution(created, attempt_id="attempt-1", at=LATER)
    proxy.armed.set()
    with pytest.raises(RedisOutcomeUnknownError):
        store.compare_and_swap(key, 1, claim.next)
    assert store.get(key) == claim.next.to_dict()

    swap = client.register_script(SCRIPTS["swap"])
    done = complete_execution(claim.next, attempt_id="attempt-1", at=LATER, result="ok")
    proxy.dropped.clear()
    proxy.armed.set()
    args: list[str | int] = [
        2,
        3,
        "completed",
        done.next.to_json(),
        key,
    ]
    indexes = [f"{prefix}idx:{status.value}" for status in Status]
    answer = swap(keys=[f"{prefix}rec:{key}", *indexes], args=args)
    assert proxy.dropped.is_set()
    assert answer == 0  # the retry lost to the write it retried
    assert store.get(key) == done.next.to_dict()  # which had landed
    client.close()


def test_a_write_refused_part_way_is_an_unknown_outcome_not_a_refusal(
    server: RedisServer, admin: redis.Redis
) -> None:
    """A user allowed every command but HSET: the create script's ZADD runs, then its
    HSET is refused with NOPERM, and Redis does not roll the script back. The store
    cannot tell that from a refusal before anything ran, so it says the outcome is
    unknown (with the code); the read back finds no record, and the index entry left
    behind lists nothing."""
    user, password = f"u-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    admin.acl_setuser(user, enabled=True, passwords=[f"+{password}"], keys=["*"],
                      commands=["+@all", "-hset"])  # fmt: skip
    try:
        store = RedisStore.from_url(
            f"redis://{user}:{password}@127.0.0.1:{server.port}/0", prefix=fresh_prefix()
        )
        key, record = checkpoint_key(binding()), create_checkpoint(binding(), created_at=NOW)
        with pytest.raises(RedisOutcomeUnknownError) as caught:
            store.create_if_absent(key, record)
        assert caught.value.code in ("NOPERM", "ERR")  # Redis 7 says ERR from a script
        assert "read the record back" in str(caught.value)
        assert password not in str(caught.value)
        assert admin.zscore(f"{store.prefix}idx:ready", key) is not None  # applied part-way
        assert store.get(key) is None
        assert store.list_records(Listing(list(Status))) == []
        store.close()
    finally:
        admin.acl_deluser(user)


# --- bad configuration: fast, clear, no secrets --------------------------------------------


def test_an_unreachable_port_is_a_clear_store_error_fast() -> None:
    port = free_port()
    for build in (RedisStore, RedisStore.from_url):
        store = build(f"redis://:hunter2@127.0.0.1:{port}/0")
        started = time.monotonic()
        with pytest.raises(RedisUnavailableError) as caught:
            store.create_if_absent("k", create_checkpoint(binding(), created_at=NOW))
        assert time.monotonic() - started < 5
        message = str(caught.value)
        assert f"127.0.0.1:{port}" in message
        assert "cannot connect" in message
        assert "redis-server" in message
        assert "hunter2" not in message
        assert not isinstance(caught.value, OutcomeUnknownError)  # nothing was sent


def test_a_wrong_or_missing_password_is_a_clear_store_error(server: RedisServer) -> None:
    for url in (
        f"redis://:not-the-password@127.0.0.1:{server.port}/0",
        f"redis://127.0.0.1:{server.port}/0",
        f"redis://someone:{server.password}@127.0.0.1:{server.port}/0",
    ):
        store = RedisStore.from_url(url)
        started = time.monotonic()
        with pytest.raises(RedisAuthenticationError) as caught:
            store.get("k")
        assert time.monotonic() - started < 5
        message = str(caught.value)
        assert "password" in message
        assert "not-the-password" not in message
        assert server.password not in message
        store.close()


def test_a_server_that_never_answers_times_out_fast() -> None:
    silent = socket.create_server(("127.0.0.1", 0))  # accepts in the kernel, never replies
    port = silent.getsockname()[1]
    try:
        store = RedisStore.from_url(
            f"redis://127.0.0.1:{port}/0", socket_timeout=0.5, connect_timeout=0.5
        )
        started = time.monotonic()
        with pytest.raises(RedisUnavailableError, match=r"did not answer within 0\.5 s"):
            store.create_if_absent("k", create_checkpoint(binding(), created_at=NOW))
        assert time.monotonic() - started < 5
    finally:
        silent.close()


def test_bad_urls_clients_and_prefixes_are_refused_without_echoing_them() -> None:
    for url in ("http://user:s3cret@host/0", "redis://:s3cret@host:notaport/0", "s3cret"):
        with pytest.raises(RedisConfigurationError) as caught:
            RedisStore.from_url(url)
        assert "s3cret" not in str(caught.value)
        with pytest.raises(RedisConfigurationError):
            AsyncRedisStore.from_url(url)
    for client in (42, None, redis.asyncio.Redis()):
        with pytest.raises(CheckpointError) as refused:
            RedisStore(client)  # type: ignore[arg-type]
        assert refused.value.field == "client_or_url"
    with pytest.raises(CheckpointError):
        AsyncRedisStore(redis.Redis())  # type: ignore[arg-type]
    for prefix in ("", "bad\nprefix", 7, "x" * 300):
        with pytest.raises(CheckpointError) as bad_prefix:
            RedisStore("redis://127.0.0.1:1/0", prefix=prefix)  # type: ignore[arg-type]
        assert bad_prefix.value.field == "prefix"


def test_writes_refuse_bad_arguments_before_any_command(redis_url: str) -> None:  # noqa: F811
    store = new_store(redis_url)
    created = create_checkpoint(binding(), created_at=NOW)
    with pytest.raises(CheckpointError):
        store.create_if_absent("bad\x00key", created)
    with pytest.raises(CheckpointError):
        store.get("")
    with pytest.raises(CheckpointError):
        store.compare_and_swap("k", "1", created)  # type: ignore[arg-type]
    assert repr(store).startswith("RedisStore(127.0.0.1:")
    assert server_for(redis_url).password not in repr(store)
    store.close()


def test_an_out_of_memory_server_refuses_the_script_before_it_runs(tmp_path: Path) -> None:
    server = start_redis_server(tmp_path / "oom")
    admin = server.client()
    store = RedisStore.from_url(server.url())
    try:
        key = checkpoint_key(binding())
        created = create_checkpoint(binding(), created_at=NOW)
        store.create_if_absent(key, created)
        admin.config_set("maxmemory", "1")
        claim = claim_execution(created, attempt_id="attempt-1", at=LATER)
        with pytest.raises(RedisCommandError) as caught:
            store.compare_and_swap(key, 1, claim.next)
        assert caught.value.code == "OOM"
        assert "maxmemory" in str(caught.value)
        assert not isinstance(caught.value, OutcomeUnknownError)
        assert store.get(key) == created.to_dict()  # reads still work; nothing changed
        assert store.list_records(Listing([Status.READY]))[0].key == key
    finally:
        store.close()
        admin.close()
        stop_redis_server(server)


# --- the persistence settings check -------------------------------------------------------


def test_the_test_server_is_durable(redis_url: str) -> None:  # noqa: F811
    with new_store(redis_url) as store:
        report = store.check_durability()
    assert report.durable
    assert report.problems == ()
    assert (report.appendonly, report.appendfsync) == ("yes", "always")
    assert report.no_appendfsync_on_rewrite == "no"
    assert report.maxmemory_policy == "noeviction"


def test_weak_persistence_settings_raise_warn_or_report(tmp_path: Path) -> None:
    server = start_redis_server(tmp_path / "weak", appendfsync="everysec")
    admin = server.client()
    store = RedisStore.from_url(server.url())
    try:
        with pytest.raises(RedisDurabilityError) as caught:
            store.check_durability()
        assert "appendfsync is everysec" in str(caught.value)
        assert "set appendfsync always" in str(caught.value)
        with pytest.warns(RedisDurabilityWarning, match="everysec"):
            report = store.check_durability(on_weak="warn")
        assert not report.durable
        assert len(report.problems) == 1
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert store.check_durability(on_weak="ignore") == report

        admin.config_set("appendonly", "no")
        admin.config_set("appendfsync", "no")
        admin.config_set("no-appendfsync-on-rewrite", "yes")
        admin.config_set("maxmemory-policy", "allkeys-lru")
        problems = store.check_durability(on_weak="ignore").problems
        assert [p.split(" ", 1)[0] for p in problems] == [
            "appendonly",
            "appendfsync",
            "no-appendfsync-on-rewrite",
            "maxmemory-policy",
        ]
        admin.config_set("maxmemory-policy", "volatile-lru")  # the store's keys have no TTL
        admin.config_set("appendonly", "yes")
        admin.config_set("appendfsync", "always")
        admin.config_set("no-appendfsync-on-rewrite", "no")
        assert store.check_durability().durable

        async def async_check() -> bool:
            async with AsyncRedisStore.from_url(server.url()) as twin:
                return (await twin.check_durability()).durable

        assert asyncio.run(async_check())
        with pytest.raises(CheckpointError):
            store.check_durability(on_weak="loud")  # type: ignore[arg-type]
    finally:
        store.close()
        admin.close()
        stop_redis_server(server)


def test_a_refused_config_get_counts_as_weak(server: RedisServer, admin: redis.Redis) -> None:
    user = f"limited-{uuid.uuid4().hex[:8]}"
    admin.acl_setuser(
        user, enabled=True, passwords=["+limited-pw"], keys=["*"], commands=["+@all", "-config"]
    )
    store = RedisStore.from_url(f"redis://{user}:limited-pw@127.0.0.1:{server.port}/0")
    try:
        with pytest.raises(RedisDurabilityError, match="refused CONFIG GET"):
            store.check_durability()
        report = store.check_durability(on_weak="ignore")
        assert report.appendonly is None
        assert not report.durable
        # The same user can use the store.
        record = create_checkpoint(binding(), created_at=NOW)
        assert store.create_if_absent(f"{uuid.uuid4().hex}", record)
    finally:
        store.close()
        admin.acl_deluser(user)


# --- clients configured in other ways -----------------------------------------------------


@pytest.mark.parametrize(
    "options", [{"protocol": 2}, {"protocol": 3}, {"decode_responses": True, "protocol": 2}]
)
def test_clients_with_other_protocols_and_decoding_give_the_same_answers(
    server: RedisServer, options: dict[str, Any]
) -> None:
    client = redis.Redis(host=server.host, port=server.port, password=server.password, **options)
    store = RedisStore(client, prefix=fresh_prefix())
    record = write_everywhere([store], "k", Status.DELIVERED, NOW, LATER)
    assert store.get("k") == record.to_dict()
    assert [s.key for s in store.list_records(Listing([Status.DELIVERED]))] == ["k"]
    assert store.check_durability().durable
    store.close()  # a client passed in stays open
    assert client.ping()
    client.close()


# --- processes killed with SIGKILL --------------------------------------------------------


def test_redis_store_survives_a_kill_storm(server: RedisServer, tmp_path: Path) -> None:
    """Worker processes share one server through open_store(url) and are killed with
    SIGKILL mid-protocol; every storm must pass the recovery pass's checks. The storm kills
    only workers that have started (about half a second each, more on a loaded machine),
    so a busy machine can still leave a storm with little done: storms are repeated (at
    most three, each on an emptied database) until tools ran at least 20 times and a
    record was caught mid-flight."""
    database = 2  # a database of its own: the storm's keys are fixed
    flusher = redis.Redis(host=server.host, port=server.port, password=server.password, db=database)
    ran, mid_flight, kills = 0, 0, 0
    for storm in range(3):
        flusher.flushdb()
        report = kill_storm(
            "tool_execution_checkpoint.testing.processes:url_store",
            json.dumps({"url": server.url(database)}),
            directory=tmp_path / f"storm-{storm}",
            workers=4,
            keys=200,
            seconds=6.0,
            seed=1 + storm,
        )
        report.check()
        kills += report.kills
        ran += sum(map(len, report.executions.values()))
        mid_flight += len([s for s in report.statuses.values() if s != "delivered"])
        if ran >= 20 and mid_flight:
            break
    flusher.close()
    assert kills >= 5  # fewer land when the machine is loaded; each kill is checked
    assert ran >= 20, "the workers hardly got to run: the storms proved little"
    assert mid_flight, "the storms left nothing mid-flight"


def test_a_hash_without_its_record_field_is_a_broken_record_not_no_record(
    redis_url: str,  # noqa: F811
) -> None:
    """Once answered "no record", so the runner recreated nothing and answered
    store-unavailable forever; now get raises INVALID_CHECKPOINT, a listing shows it as
    a BrokenRecord and an absent key is still None."""
    store = RedisStore.from_url(redis_url, prefix=fresh_prefix())
    client = redis.Redis.from_url(redis_url)
    try:
        key = checkpoint_key(Binding("ns", "no-field", "tool", "1", "sha256:0"))
        name = store._layout.record_key(key)
        client.hset(name, mapping={"revision": "1", "status": "delivered", "updated_us": "0"})
        client.zadd(f"{store._layout.prefix}idx:delivered", {key: 0})
        with pytest.raises(CheckpointError) as caught:
            store.get(key)
        assert caught.value.code is ErrorCode.INVALID_CHECKPOINT
        assert caught.value.__context__ is None
        [line] = store.list_records(Listing(list(Status)))
        assert isinstance(line, BrokenRecord)
        assert (line.key, line.code) == (key, ErrorCode.INVALID_CHECKPOINT)
        assert store.get(checkpoint_key(Binding("ns", "absent", "tool", "1", "sha256:0"))) is None
    finally:
        client.close()
        store.close()


def test_a_stale_index_entry_never_lists_a_record_under_a_status_it_does_not_hold(
    admin: redis.Redis,
    redis_url: str,  # noqa: F811
) -> None:
    """As a durable swap after a lost relaxed one can leave (the store's "Delivered
    marks"): the key also sits in another status's index. Listings check each record's
    own status, so it is listed once, under the status it holds."""
    store = new_store(redis_url)
    record = create_checkpoint(binding(), created_at=NOW)
    assert store.create_if_absent("k", record)
    admin.zadd(f"{store.prefix}idx:delivering", {"k": 0})
    assert store.list_records(Listing([Status.DELIVERING])) == []
    both = store.list_records(Listing([Status.READY, Status.DELIVERING]))
    assert both == [RecordSummary.of("k", record)]
    store.close()
