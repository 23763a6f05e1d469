"""What each part of a RedisStore write costs the server and the client: the store's
write scripts against plain SETs, taken apart piece by piece.

Not part of ``make bench``: it shows what each piece of the Redis scripts costs, which
decided what each does (docs/stores/redis.md, "What a write costs"). On a throwaway Redis
started here with ``appendonly yes`` and ``appendfsync always`` (as peers.py runs it),
each variant makes the first two writes of ``run_once``'s call (the record created
claimed, then swapped to delivering with its 1 KiB result: stores.recorded_call's
records), on job keys of its own:

- ``SET``: two plain SETs of the same record texts (SET NX, then SET), the baseline:
  what powertools sends;
- ``EVALSHA SET``: the same two SETs, each inside a script: what EVALSHA itself adds;
- ``hash, no index``: the record's hash (revision, status, record), the create checked
  with EXISTS and the swap with the stored revision (HMGET), no index and no TIME;
- ``one index, by time``: and one sorted set of every record, scored by the server's
  TIME whatever its status (a listing by status would read every record);
- ``one index, by status``: one sorted set whose members sort by status, then time
  (score 0, member ``status:time:key``, for ZRANGEBYLEX), the time of the last write
  kept in the hash to find the old member;
- ``per-status, no check``: the per-status indexes without any TYPE check (unsafe: a
  foreign value at the old status's index fails a swap after its first write);
- ``the store's scripts``: ``scripts.CREATE`` and ``scripts.SWAP``, with the arguments
  ``Layout`` builds;
- ``the store's + updated_us``: the same, the hash also given an ``updated_us`` field;
- ``before #36 (TYPE checks)``: the scripts of earlier versions
  (tests/earlier_redis_scripts.py): a TYPE check of every index written, ``updated_us``.

Every command is built before its batch and sent as the store sends its own (packed by
``layout.packed`` on a connection of redis-py's pool, the reply read undecoded), so the
client's work differs between variants only by what is sent and answered. Measured in
paired rounds (the order rotating each round), each variant's median per call and its
median per-round ratio to ``SET``'s:

- wall time, with 1 caller and with 8 threads;
- client CPU (``time.process_time``) and the server's CPU (``INFO cpu``, user + system:
  its commands, its I/O, its fsync calls);
- the server's command time (``INFO commandstats`` usec of the commands sent: a script's
  inner commands are inside its own).

And, in a pass of its own per variant: the commands the server ran per call (those in
scripts included), the AOF bytes per call (``aof_current_size``) and the commands
appended to the AOF (read from it).

    python benchmarks/redis_writes.py [--quick] [--json PATH]
"""

from __future__ import annotations

import functools
import itertools
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import redis
from _measure import main_of, paired_rounds, threaded
from stores import recorded_call

from tool_execution_checkpoint import Checkpoint
from tool_execution_checkpoint.stores.redis import scripts
from tool_execution_checkpoint.stores.redis.layout import Layout, Request, packed
from tool_execution_checkpoint.stores.redis.scripts import STATUS_ORDER
from tool_execution_checkpoint.table import Status
from tool_execution_checkpoint.validation import timestamp_microseconds

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import earlier_redis_scripts
from redis_server import RedisServer, start_redis_server, stop_redis_server

Command = tuple[bytes, ...]
WORKERS = 8

# --- the variants' scripts ------------------------------------------------------------------
#
# Arguments as the store's (create: revision, status, record, key; swap: expected, revision,
# status, record, key), with updated_us after the status where a variant keeps it in the
# hash; KEYS[1] the record's hash, then the variant's index keys.

_NOW = scripts._NOW
_STATUSES = scripts._LUA_STATUSES


def _hset(first: int, *, updated: bool = False, extra: str = "") -> str:
    """HSET of the record's fields from ARGV[first] on."""
    fields = (
        ["revision", "status", "updated_us", "record"]
        if updated
        else ["revision", "status", "record"]
    )
    pairs = ", ".join(f"'{field}', ARGV[{first + n}]" for n, field in enumerate(fields))
    return f"redis.call('HSET', KEYS[1], {pairs}{extra})"


# KEYS[1]: the key; ARGV[1]: the text.
EVAL_SET_NX = "#!lua\nreturn redis.call('SET', KEYS[1], ARGV[1], 'NX') and 1 or 0\n"
EVAL_SET = "#!lua\nredis.call('SET', KEYS[1], ARGV[1])\nreturn 1\n"

_CREATED = "if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end\n"
_SWAPPED = """local stored = redis.call('HMGET', KEYS[1], 'revision', 'status')
if stored[1] ~= ARGV[1] then return 0 end
"""

HASH_CREATE = f"#!lua\n{_CREATED}{_hset(1)}\nreturn 1\n"
HASH_SWAP = f"#!lua\n{_SWAPPED}{_hset(2)}\nreturn 1\n"

# KEYS[2]: the one index, every record scored by the time of its last write.
FLAT_CREATE = f"""#!lua
{_NOW}{_CREATED}redis.call('ZADD', KEYS[2], now(), ARGV[4])
{_hset(1)}
return 1
"""
FLAT_SWAP = f"""#!lua
{_NOW}{_SWAPPED}redis.call('ZADD', KEYS[2], now(), ARGV[5])
{_hset(2)}
return 1
"""

# KEYS[2]: the one index; members "status:time:key" (time zero-padded to 20 digits) at
# score 0, the time also kept in the hash's 'written' field to find the old member.
_MEMBER = """
local function member(status, written, key)
  return status .. ':' .. string.rep('0', 20 - #written) .. written .. ':' .. key
end
"""
LEX_CREATE = f"""#!lua
{_NOW}{_MEMBER}{_CREATED}local written = now()
redis.call('ZADD', KEYS[2], 0, member(ARGV[2], written, ARGV[4]))
{_hset(1, extra=", 'written', written")}
return 1
"""
LEX_SWAP = f"""#!lua
{_NOW}{_MEMBER}
local stored = redis.call('HMGET', KEYS[1], 'revision', 'status', 'written')
if stored[1] ~= ARGV[1] then return 0 end
local written = now()
redis.call('ZREM', KEYS[2], member(stored[2], stored[3], ARGV[5]))
redis.call('ZADD', KEYS[2], 0, member(ARGV[3], written, ARGV[5]))
{_hset(2, extra=", 'written', written")}
return 1
"""

# The per-status indexes (KEYS[2] of a create: its status's; KEYS[i + 1] of a swap: the
# index of statuses[i]), no check at all: a foreign value at the old index fails the
# swap after its ZADD.
UNCHECKED_CREATE = FLAT_CREATE
UNCHECKED_SWAP = f"""#!lua
{_NOW}{_STATUSES}{scripts._SWAP_READ}
redis.call('ZADD', new_index, now(), ARGV[5])
if old_index and old_index ~= new_index then redis.call('ZREM', old_index, ARGV[5]) end
{_hset(2)}
return 1
"""

# The store's scripts with the hash's updated_us field written as well.
UPDATED_CREATE = (
    scripts.CREATE.text.decode()
    .replace("'record', ARGV[3]", "'updated_us', ARGV[3], 'record', ARGV[4]")
    .replace("now(), ARGV[4]", "now(), ARGV[5]")
)
UPDATED_SWAP = (
    scripts.SWAP.text.decode()
    .replace("ARGV[5])\n", "ARGV[6])\n")
    .replace("'record', ARGV[4]", "'updated_us', ARGV[4], 'record', ARGV[5]")
)

_TEXTS = {
    "set_nx": EVAL_SET_NX,
    "set": EVAL_SET,
    "hash_create": HASH_CREATE,
    "hash_swap": HASH_SWAP,
    "flat_create": FLAT_CREATE,
    "flat_swap": FLAT_SWAP,
    "lex_create": LEX_CREATE,
    "lex_swap": LEX_SWAP,
    "unchecked_create": UNCHECKED_CREATE,
    "unchecked_swap": UNCHECKED_SWAP,
    "earlier_create": earlier_redis_scripts.CREATE,
    "earlier_swap": earlier_redis_scripts.SWAP,
    "updated_create": UPDATED_CREATE,
    "updated_swap": UPDATED_SWAP,
    "store_create": scripts.CREATE.text.decode(),
    "store_swap": scripts.SWAP.text.decode(),
}


# --- the variants -------------------------------------------------------------------------

Build = Callable[[str], list[Command]]
"""A variant: the commands of one call's two writes on a job key."""

ONE_INDEX = b"idx:one"
"""Where a variant with one index keeps it, under the prefix."""


def _evalsha(sha: bytes, keys: Sequence[bytes], args: Sequence[bytes]) -> Command:
    return (b"EVALSHA", sha, str(len(keys)).encode(), *keys, *args)


class Variants:
    """Every variant's commands for a job key: the store's own for its scripts (as its
    Layout builds them), the same keys and record texts for the others."""

    def __init__(self, client: redis.Redis, prefix: str, records: Sequence[Checkpoint]) -> None:
        self.layout = Layout(prefix)
        self.prefix = prefix.encode()
        self.created, self.swapped = records
        self.texts = [record.to_json().encode() for record in records]
        self.updated_us = [str(timestamp_microseconds(r.updated_at)).encode() for r in records]
        self.sha = {name: client.script_load(text).encode() for name, text in _TEXTS.items()}

    def builds(self) -> dict[str, Build]:
        one = self.prefix + ONE_INDEX
        return {
            "SET": self.plain_sets,
            "EVALSHA SET": self.evalsha_sets,
            "hash, no index": functools.partial(self.scripted, "hash", ()),
            "one index, by time": functools.partial(self.scripted, "flat", (one,)),
            "one index, by status": functools.partial(self.scripted, "lex", (one,)),
            "per-status, no check": functools.partial(self.scripted, "unchecked", None),
            "the store's scripts": self.store,
            "the store's + updated_us": functools.partial(
                self.scripted, "updated", None, updated=True
            ),
            "before #36 (TYPE checks)": functools.partial(
                self.scripted, "earlier", None, updated=True
            ),
        }

    def store(self, key: str) -> list[Command]:
        """The store's own two writes for ``key``, as its Layout builds them."""
        create = next(self.layout.create(key, self.created))
        swap = next(self.layout.swap(key, self.created.revision, self.swapped))
        assert isinstance(create, Request)
        assert isinstance(swap, Request)
        return [create.args, swap.args]

    def plain_sets(self, key: str) -> list[Command]:
        name = self.layout.record_key(key)
        return [(b"SET", name, self.texts[0], b"NX"), (b"SET", name, self.texts[1])]

    def evalsha_sets(self, key: str) -> list[Command]:
        name = self.layout.record_key(key)
        return [
            _evalsha(self.sha["set_nx"], (name,), (self.texts[0],)),
            _evalsha(self.sha["set"], (name,), (self.texts[1],)),
        ]

    def scripted(
        self, stem: str, indexes: tuple[bytes, ...] | None, key: str, *, updated: bool = False
    ) -> list[Command]:
        """The variant's scripts on the record's hash and ``indexes`` (None: the store's
        per-status indexes, as it passes them)."""
        name, member = self.layout.record_key(key), key.encode()
        created, swapped = self.created, self.swapped
        create_keys: tuple[bytes, ...]
        swap_keys: tuple[bytes, ...]
        if indexes is None:
            create_keys = (name, self.layout.index_key(key, created.status))
            swap_keys = (name, *(self.layout.index_key(key, status) for status in STATUS_ORDER))
        else:
            create_keys = swap_keys = (name, *indexes)
        first, second = ([us] for us in self.updated_us) if updated else ([], [])
        create_args = (str(created.revision).encode(), created.status.value.encode(), *first)
        swap_args = (
            str(created.revision).encode(),
            str(swapped.revision).encode(),
            swapped.status.value.encode(),
            *second,
        )
        return [
            _evalsha(
                self.sha[f"{stem}_create"], create_keys, (*create_args, self.texts[0], member)
            ),
            _evalsha(self.sha[f"{stem}_swap"], swap_keys, (*swap_args, self.texts[1], member)),
        ]


# --- measuring ------------------------------------------------------------------------------


def _send(client: redis.Redis, commands: Sequence[Command]) -> None:
    """Send each command on one connection of the client's pool and read its reply, as
    the store sends its own (layout.packed, no reply decoding)."""
    pool = client.connection_pool
    connection: Any = pool.get_connection()
    try:
        for command in commands:
            connection.send_packed_command(packed(command))
            if connection.read_response(disable_decoding=True) not in (1, b"OK"):
                raise AssertionError("a write did not land")
    finally:
        pool.release(connection)


def _server_cpu(admin: redis.Redis) -> float:
    cpu: dict[str, float] = admin.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


Sample = tuple[float, float, float, float]
"""One batch, per call: wall seconds, client CPU seconds, server CPU seconds, and the
server's command microseconds (INFO commandstats usec of the commands sent)."""
MEASURES = ("wall", "client_cpu", "server_cpu", "command_us")
SENT = ("cmdstat_evalsha", "cmdstat_set")


class Batches:
    """Fresh job keys for each batch, and each batch timed (:data:`Sample`)."""

    def __init__(self, client: redis.Redis, admin: redis.Redis, variants: Variants) -> None:
        self.client = client
        self.admin = admin
        self.builds = variants.builds()
        self.jobs = itertools.count()

    def calls(self, variant: str, count: int) -> list[list[Command]]:
        build = self.builds[variant]
        return [build(f"job-{next(self.jobs)}") for _ in range(count)]

    def timed(self, variant: str, workers: int, count: int) -> Sample:
        shares = [self.calls(variant, count) for _ in range(workers)]
        self.admin.config_resetstat()
        server = _server_cpu(self.admin)
        cpu = time.process_time()
        if workers == 1:
            began = time.perf_counter()
            for commands in shares[0]:
                _send(self.client, commands)
            wall = time.perf_counter() - began
        else:
            wall = threaded(
                [
                    functools.partial(_send, self.client, [c for call in share for c in call])
                    for share in shares
                ]
            )
        client_cpu = time.process_time() - cpu
        server_cpu = _server_cpu(self.admin) - server
        stats: dict[str, dict[str, float]] = self.admin.info("commandstats")
        usec = sum(row["usec"] for name, row in stats.items() if name in SENT)
        total = workers * count
        return wall / total, client_cpu / total, server_cpu / total, usec / total


def _aof_tail(directory: Path) -> tuple[Path, int]:
    """The AOF file Redis appends to now (the newest incr file) and its size."""
    files = sorted(
        (directory / "appendonlydir").glob("*.incr.aof"),
        key=lambda path: int(path.name.split(".")[-3]),
    )
    return files[-1], files[-1].stat().st_size


def _commands_in(data: bytes) -> Counter[str]:
    """The commands of RESP arrays ``data`` holds, by name (MULTI and EXEC included)."""
    names: Counter[str] = Counter()
    position = 0
    while position < len(data):
        end = data.index(b"\r\n", position)
        count = int(data[position + 1 : end])
        position = end + 2
        arguments = []
        for _ in range(count):
            end = data.index(b"\r\n", position)
            size = int(data[position + 1 : end])
            arguments.append(data[end + 2 : end + 2 + size])
            position = end + 2 + size + 2
        names[arguments[0].decode().upper()] += 1
    return names


def counted(batches: Batches, server: RedisServer, variant: str, count: int) -> dict[str, Any]:
    """What the server ran, spent and appended per call of ``variant``."""
    admin = batches.admin
    calls = batches.calls(variant, count)
    path, size = _aof_tail(server.directory)
    aof = int(admin.info("persistence")["aof_current_size"])
    admin.config_resetstat()
    for commands in calls:
        _send(batches.client, commands)
    stats: dict[str, dict[str, float]] = admin.info("commandstats")
    grown = int(admin.info("persistence")["aof_current_size"]) - aof
    mine = {name: row for name, row in stats.items() if not name.startswith("cmdstat_config")}
    with path.open("rb") as appended:
        appended.seek(size)
        replicated = _commands_in(appended.read())
    replicated.pop("SELECT", None)
    return {
        "commands": sum(row["calls"] for row in mine.values()) / count,
        "aof_bytes": grown / count,
        "replicated": {name: n / count for name, n in sorted(replicated.items())},
    }


def check(batches: Batches, variants: Variants) -> None:
    """Every variant leaves the swapped record under its key (a wrong argument in a
    variant's script would store something else)."""
    for variant, build in batches.builds.items():
        key = f"check-{next(batches.jobs)}"
        _send(batches.client, build(key))
        name = variants.layout.record_key(key)
        stored = batches.admin.get(name) if "SET" in variant else batches.admin.hget(name, "record")
        if stored != variants.texts[1]:
            raise AssertionError(f"{variant}: the record stored is not the one written")


def measure(quick: bool) -> dict[str, Any]:
    count, rounds = (60, 3) if quick else (400, 15)
    _, writes = recorded_call("job")
    records = [writes[0][1], writes[1][1]]
    if records[0].status is not Status.EXECUTING or writes[1][0] != records[0].revision:
        raise AssertionError("run_once's first two writes are not a claimed create and a swap")
    with tempfile.TemporaryDirectory(prefix="tec-bench-writes-") as name:
        # No automatic AOF rewrite: it would move the AOF's size and file mid-count.
        no_rewrite = ("--auto-aof-rewrite-percentage", "0")
        server = start_redis_server(Path(name) / "redis", extra_arguments=no_rewrite)
        try:
            client = redis.Redis.from_url(server.url(), max_connections=WORKERS + 1)
            admin = server.client()
            variants = Variants(client, "tec-writes:", records)
            batches = Batches(client, admin, variants)
            check(batches, variants)
            names = list(batches.builds)
            for variant in names:  # connections opened, every script cached
                batches.timed(variant, WORKERS, 4)
            timings = {
                workers: paired_rounds(
                    {
                        variant: functools.partial(batches.timed, variant, workers, share)
                        for variant in names
                    },
                    rounds,
                )
                for workers, share in ((1, count), (WORKERS, max(1, count // WORKERS)))
            }
            counts = {variant: counted(batches, server, variant, count) for variant in names}
            version = admin.info("server")["redis_version"]
            client.close()
            admin.close()
        finally:
            stop_redis_server(server)
    return {
        "workers": {str(workers): _summary(samples) for workers, samples in timings.items()},
        "server_per_call": counts,
        "server": f"Redis {version}, appendonly yes, appendfsync always",
        "calls_per_round": count,
        "rounds": rounds,
    }


def _summary(samples: dict[str, list[Sample]]) -> dict[str, Any]:
    """Per measure, each variant's median (µs per call) and its median per-round ratio
    to SET's."""
    base = samples["SET"]
    summary: dict[str, Any] = {}
    for position, measure in enumerate(MEASURES):
        scale = 1.0 if measure == "command_us" else 1e6
        summary[measure] = {
            variant: {
                "us_per_call": round(statistics.median(s[position] for s in values) * scale, 1),
                "ratio_to_set": round(
                    statistics.median(
                        s[position] / b[position]
                        for s, b in zip(values, base, strict=True)
                        if b[position] > 0
                    ),
                    3,
                ),
            }
            for variant, values in samples.items()
        }
    return summary


def report(results: dict[str, Any]) -> None:
    print(
        f"per call (2 writes), µs, median of {results['rounds']} paired rounds, and its "
        "median ratio to SET's:"
    )
    heads = ("wall", "client CPU", "server CPU", "command µs")
    for workers, summary in results["workers"].items():
        print(f"  {workers} worker{'' if workers == '1' else 's'}")
        print(f"    {'variant':<26}" + "".join(f"{head:>16}" for head in heads))
        for variant in summary["wall"]:
            cells = (
                f"{cell['us_per_call']:7.1f} {cell['ratio_to_set']:6.2f}x"
                for cell in (summary[m][variant] for m in MEASURES)
            )
            print(f"    {variant:<26}" + "".join(f"{cell:>16}" for cell in cells))
    print("server, per call: commands run (in scripts too), AOF bytes, commands appended")
    for variant, row in results["server_per_call"].items():
        appended = ", ".join(f"{name} {n:g}" for name, n in row["replicated"].items())
        print(f"  {variant:<26} {row['commands']:5.1f} {row['aof_bytes']:7.0f}  {appended}")
    print(results["server"])


if __name__ == "__main__":
    main_of(__doc__, measure, report)
