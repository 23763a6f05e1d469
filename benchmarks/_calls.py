"""Each subject's one guarded call, for peers.py and redis_breakdown.py.

A maker takes what the subject opened (a store, a backend, a client or the raw side)
and ``ran``, and returns the call: it takes a job id, runs the guarded function (``ran``,
which counts it and returns the 1 KiB result) at most once for it, and checks that the
caller got the result.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, cast

import redis
from _drive import PAYLOAD, Ran
from _raw import raw_binding, raw_lifecycle
from aws_lambda_powertools.utilities.idempotency import (
    IdempotencyConfig,
    idempotent,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.persistence.redis import (
    RedisCachePersistenceLayer,
)
from idemkit import MethodConfig, idempotent_sync
from idemkit import idempotent as idemkit_async

from tool_execution_checkpoint import Binding, RunStatus, checkpointed, run_once, run_once_async

__all__ = [
    "guard_async",
    "guard_sync",
    "idemkit_async_call",
    "idemkit_sync_call",
    "powertools_call",
    "powertools_function_call",
    "raw_writes",
    "tec_async",
    "tec_sync",
]


class FakeLambdaContext:
    """What powertools reads from a Lambda context."""

    function_name = "bench"
    function_version = "$LATEST"
    memory_limit_in_mb = 128
    invoked_function_arn = "arn:aws:lambda:eu-west-1:000000000000:function:bench"
    aws_request_id = "bench-request"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 300_000


def _binding(job: str) -> Binding:
    return Binding("bench", job, "tool", "1", "sha256:0")


def tec_sync(store: Any, ran: Ran) -> Callable[[str], None]:
    def call(job: str) -> None:
        delivered: list[object] = []
        outcome = run_once(store, _binding(job), functools.partial(ran, job), delivered.append)
        if outcome.status is not RunStatus.EXECUTED_AND_DELIVERED or delivered != [PAYLOAD]:
            raise AssertionError(f"run_once: {outcome.status}")

    return call


def tec_async(store: Any, ran: Ran) -> Callable[[str], Awaitable[None]]:
    async def call(job: str) -> None:
        delivered: list[object] = []

        async def tool() -> dict[str, Any]:
            return ran(job)

        async def deliver(payload: object) -> None:
            delivered.append(payload)

        outcome = await run_once_async(store, _binding(job), tool, deliver)
        if outcome.status is not RunStatus.EXECUTED_AND_DELIVERED or delivered != [PAYLOAD]:
            raise AssertionError(f"run_once_async: {outcome.status}")

    return call


def _job_id(bound: inspect.BoundArguments) -> str:
    return str(bound.arguments["job"])


def guard_sync(store: Any, ran: Ran) -> Callable[[str], None]:
    """The one-line guard as a user writes it: ``@checkpointed`` on the tool, the job id
    as the call id (what a framework's tool-call id is)."""

    @checkpointed(store, namespace="bench", name="tool", call_id=_job_id)
    def tool(job: str) -> dict[str, Any]:
        return ran(job)

    def call(job: str) -> None:
        if tool(job) != PAYLOAD:
            raise AssertionError("@checkpointed returned another result")

    return call


def guard_async(store: Any, ran: Ran) -> Callable[[str], Awaitable[None]]:
    """:func:`guard_sync` on an async tool and an async store."""

    @checkpointed(store, namespace="bench", name="tool", call_id=_job_id)
    async def tool(job: str) -> dict[str, Any]:
        return ran(job)

    async def call(job: str) -> None:
        if await tool(job) != PAYLOAD:
            raise AssertionError("@checkpointed returned another result")

    return call


def raw_writes(raw: Any, ran: Ran, *, mark: bool = True) -> Callable[[str], None]:
    """The protocol's floor: the same three writes run_once makes (the claimed record,
    the result with its delivery claim, the relaxed delivered mark), as dict records
    through the same driver with none of the library (_raw.raw_lifecycle); without
    ``mark``, the first two only."""

    def call(job: str) -> None:
        delivered: list[object] = []
        tool = functools.partial(ran, job)
        binding = raw_binding(job)
        if not raw_lifecycle(
            raw,
            f"bench/{job}",
            binding=binding,
            me=job,
            tool=tool,
            deliver=delivered.append,
            mark=mark,
        ):
            raise AssertionError("a job of its own was created by another caller")
        if delivered != [PAYLOAD]:
            raise AssertionError("the raw writes delivered another result")

    return call


def _one_tenant(arguments: Any) -> str:
    del arguments
    return "bench"


def _method_config() -> MethodConfig:
    # key_fields: the job id is the operation's identity; scope: one tenant, said so.
    return MethodConfig(key_fields=["job"], scope=_one_tenant)


def idemkit_sync_call(backend: Any, ran: Ran) -> Callable[[str], None]:
    def tool(job: str) -> dict[str, Any]:
        return ran(job)

    guarded = idempotent_sync(backend=backend, config=_method_config())(tool)

    def call(job: str) -> None:
        if guarded(job=job) != PAYLOAD:
            raise AssertionError("idemkit returned another result")

    return call


def idemkit_async_call(backend: Any, ran: Ran) -> Callable[[str], Awaitable[None]]:
    async def tool(job: str) -> dict[str, Any]:
        return ran(job)

    guarded = idemkit_async(backend=backend, config=_method_config())(tool)

    async def call(job: str) -> None:
        if await guarded(job=job) != PAYLOAD:
            raise AssertionError("idemkit returned another result")

    return call


def powertools_call(client: redis.Redis, ran: Ran) -> Callable[[str], None]:
    layer = RedisCachePersistenceLayer(client=cast(Any, client))
    config = IdempotencyConfig(event_key_jmespath="job")
    context = FakeLambdaContext()

    def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
        del context
        return ran(event["job"])

    handler = idempotent(persistence_store=layer, config=config)(handle)

    def call(job: str) -> None:
        if handler({"job": job}, context) != PAYLOAD:
            raise AssertionError("powertools returned another result")

    return call


def powertools_function_call(client: redis.Redis, ran: Ran) -> Callable[[str], None]:
    """powertools' decorator for any function (``idempotent_function``), keyed by the
    ``job`` keyword argument."""
    layer = RedisCachePersistenceLayer(client=cast(Any, client))
    config = IdempotencyConfig(event_key_jmespath="job")

    def run(request: dict[str, Any]) -> dict[str, Any]:
        return ran(request["job"])

    guard = idempotent_function(
        data_keyword_argument="request", persistence_store=layer, config=config
    )
    tool = cast(Callable[..., dict[str, Any]], guard(run))

    def call(job: str) -> None:
        if tool(request={"job": job}) != PAYLOAD:
            raise AssertionError("powertools returned another result")

    return call
