"""identity: which call is which, through the one-line guard. A named scope numbers calls
per intent, a refused call keeps its number, the innermost declaration wins, the intent is
the arguments that identify the effect, and the downstream key follows the call."""

from __future__ import annotations

import asyncio

import pydantic
import pytest

from tool_execution_checkpoint import (
    CallNeedsReconciliation,
    CheckpointError,
    ErrorCode,
    MemoryStore,
    ToolDidNotRun,
    ToolGuard,
    ToolOutcomeUnknown,
    call_scope,
    checkpointed,
    current_idempotency_key,
    tool_call,
)
from tool_execution_checkpoint.testing.conformance import leaks

SECRET = "SECRET-7f3e"


class Outbox:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def send(self, to: str, body: str) -> str:
        self.sent.append((to, body))
        return f"m-{len(self.sent)}:{to}"


def test_a_retried_scope_replays_each_intent_whatever_the_order() -> None:
    outbox, store = Outbox(), MemoryStore()

    @checkpointed(store)
    def send_email(to: str, body: str) -> str:
        return outbox.send(to, body)

    with call_scope("conv-1/turn-1"):
        first = [send_email("ada", "hi"), send_email("bob", "hi")]
    with call_scope("conv-1/turn-1"):  # the retry: the model orders the calls the other way
        again = [send_email("bob", "hi"), send_email("ada", "hi")]
    assert again == first[::-1]
    assert len(outbox.sent) == 2


def test_identical_intents_are_distinct_calls_in_one_scope_and_across_scopes() -> None:
    outbox, store = Outbox(), MemoryStore()

    @checkpointed(store)
    def send_email(to: str, body: str) -> str:
        return outbox.send(to, body)

    with call_scope("conv-1/turn-1"):
        one, two = send_email("ada", "hi"), send_email("ada", "hi")
    with call_scope("conv-1/turn-2"):
        three = send_email("ada", "hi")
    assert len({one, two, three}) == 3
    assert len(outbox.sent) == 3
    with call_scope("conv-1/turn-1"):  # the first turn retried: both answered, none rerun
        assert [send_email("ada", "hi"), send_email("ada", "hi")] == [one, two]
    assert len(outbox.sent) == 3


def test_a_refused_call_keeps_its_number_so_its_retry_never_runs_the_tool() -> None:
    outbox, store = Outbox(), MemoryStore()

    @checkpointed(store)
    def send_email(to: str) -> str:
        outbox.send(to, "")
        raise ToolOutcomeUnknown("the provider timed out")

    def model_retries(times: int) -> list[str]:
        told = []
        for _ in range(times):  # the model retries what it was told failed
            try:
                send_email("ada")
            except CallNeedsReconciliation as refusal:
                told.append(str(refusal.outcome.ran_tool))
        return told

    with pytest.raises(CallNeedsReconciliation) as at_exit, call_scope("conv-1/turn-1"):
        assert model_retries(3) == ["True", "False", "False"]
    assert len(outbox.sent) == 1
    assert at_exit.value.outcome.ran_tool is True  # the first refusal, raised at exit


def test_the_scope_raises_its_first_refusal_when_a_framework_swallowed_it() -> None:
    store = MemoryStore()

    @checkpointed(store)
    def send_email(to: str) -> str:  # noqa: ARG001 - fingerprinted
        raise ToolOutcomeUnknown("unknown")

    def framework_loop() -> str:
        try:  # what a runner does with any tool exception
            return send_email("ada")
        except Exception as error:
            return f"error: {type(error).__name__}"

    with pytest.raises(CallNeedsReconciliation), call_scope("conv-1/turn-1"):
        assert framework_loop() == "error: CallNeedsReconciliation"


def test_the_innermost_declaration_wins() -> None:
    outbox, store = Outbox(), MemoryStore()

    @checkpointed(store, call_id=lambda _bound: "framework-id")
    def send_email(to: str) -> str:
        return outbox.send(to, "")

    send_email("ada")
    send_email("ada")  # the framework's id: one call
    with call_scope("conv-1/turn-1"):
        send_email("ada")  # the scope wins over the framework's id: a new call
        with tool_call("explicit"):
            send_email("ada")  # the explicit id wins over the scope
            send_email("ada")
    assert len(outbox.sent) == 3


def test_a_call_without_any_identity_is_refused_before_it_runs() -> None:
    outbox = Outbox()

    @checkpointed(MemoryStore())
    def send_email(to: str) -> str:
        return outbox.send(to, "")

    with pytest.raises(CheckpointError) as caught:
        send_email("ada")
    assert caught.value.code is ErrorCode.INVALID_ARGUMENT
    assert outbox.sent == []


def test_a_reworded_argument_outside_the_intent_is_the_same_call() -> None:
    outbox, store = Outbox(), MemoryStore()

    @checkpointed(store, intent=("to",))
    def send_email(to: str, body: str) -> str:
        return outbox.send(to, body)

    with call_scope("conv-1/turn-1"):
        first = send_email("ada", "Your invoice is paid.")
    with call_scope("conv-1/turn-1"):  # the retried turn words the body anew
        again = send_email("ada", "Your invoice has been paid.")
    assert again == first
    assert outbox.sent == [("ada", "Your invoice is paid.")]


def test_an_intent_name_that_is_not_a_parameter_is_refused_when_decorating() -> None:
    with pytest.raises(CheckpointError) as caught:
        checkpointed(MemoryStore(), intent=("recipient",))(lambda to: to)
    assert caught.value.code is ErrorCode.INVALID_ARGUMENT
    assert caught.value.field == "intent"


class Charge(pydantic.BaseModel):
    card: pydantic.SecretStr
    tenant: str = pydantic.Field(exclude=True)


def test_secrets_and_excluded_fields_tell_calls_apart_and_never_show() -> None:
    charged: list[str] = []
    store = MemoryStore()

    @checkpointed(store)
    def charge(request: Charge) -> str:
        charged.append(request.tenant)
        return "ok"

    with call_scope("conv-1/turn-1"):
        charge(Charge(card=pydantic.SecretStr(SECRET), tenant="a"))
        charge(Charge(card=pydantic.SecretStr("4242"), tenant="a"))
        charge(Charge(card=pydantic.SecretStr(SECRET), tenant="b"))
    assert charged == ["a", "a", "b"]
    with tool_call("one-call"):
        charge(Charge(card=pydantic.SecretStr(SECRET), tenant="a"))
        with pytest.raises(CheckpointError) as caught:  # another card: never a cache hit
            charge(Charge(card=pydantic.SecretStr("4242"), tenant="a"))
    assert caught.value.code is ErrorCode.BINDING_CONFLICT
    assert not leaks(caught.value, SECRET)
    assert all(SECRET not in text for text in store._texts.values())


def test_an_argument_the_fingerprint_cannot_encode_is_refused_before_the_tool_runs() -> None:
    ran: list[object] = []

    @checkpointed(MemoryStore())
    def send(handle: object) -> str:
        ran.append(handle)
        return "ok"

    with tool_call("call-1"), pytest.raises(CheckpointError) as caught:
        send(object())
    assert caught.value.code is ErrorCode.PAYLOAD_NOT_JSON
    assert ran == []


def test_a_mutated_default_still_fingerprints_as_declared() -> None:
    outbox, store = Outbox(), MemoryStore()

    @checkpointed(store)
    def send_email(to: str, cc: list[str] = []) -> str:  # noqa: B006 - the bug under test
        cc.append("audit")
        return outbox.send(to, ",".join(cc))

    with tool_call("call-1"):
        first = send_email("ada")
        assert send_email("ada") == first  # no BINDING_CONFLICT on its own replay
    assert len(outbox.sent) == 1


def test_the_downstream_key_follows_the_call_and_shows_nothing() -> None:
    keys: list[str] = []
    store = MemoryStore()

    @checkpointed(store)
    def send_email(to: str) -> str:
        keys.append(current_idempotency_key())
        if len(keys) == 1:
            raise ToolDidNotRun("the provider was unreachable: nothing sent")
        return to

    @checkpointed(store, namespace="other")
    def other(to: str) -> str:
        keys.append(current_idempotency_key())
        return to

    with tool_call(f"{SECRET}-1"):
        with pytest.raises(ToolDidNotRun):
            send_email("ada")
        send_email("ada")  # the same call runs again: the same key
    with tool_call(f"{SECRET}-2"):
        send_email("ada")
        other("ada")
    assert keys[0] == keys[1]
    assert len(set(keys)) == 3
    assert all(key.startswith("tec-") and SECRET not in key for key in keys)
    with pytest.raises(CheckpointError) as caught:
        current_idempotency_key()
    assert caught.value.code is ErrorCode.INVALID_ARGUMENT


def test_the_downstream_key_is_current_in_an_async_tool() -> None:
    keys: list[str] = []

    @checkpointed(MemoryStore())
    async def send_email(to: str) -> str:
        keys.append(current_idempotency_key())
        return to

    async def twice() -> None:
        for _ in range(2):
            with call_scope("conv-1/turn-1"):
                await send_email("ada")

    asyncio.run(twice())
    assert len(keys) == 1  # the second is a replay: the tool does not run
    assert keys[0].startswith("tec-")


def test_a_scope_inside_a_tool_call_block_is_the_innermost_and_wins() -> None:
    outbox, store = Outbox(), MemoryStore()

    @checkpointed(store)
    def send_email(to: str) -> str:
        return outbox.send(to, "")

    with tool_call("explicit"):
        send_email("ada")
        with call_scope("conv-1/turn-1"):
            send_email("ada")  # a new call in the scope, not the block's id again
            send_email("ada")
    assert len(outbox.sent) == 3


def test_an_authoritative_framework_id_wins_over_any_declaration() -> None:
    outbox, store = Outbox(), MemoryStore()
    guard = ToolGuard(store, tool_name="send_email")

    def send() -> str:
        return outbox.send("ada", "")

    with call_scope("conv-1/turn-1"), tool_call("stray"):
        first = guard.call("client-key", {"to": "ada"}, send, authoritative=True)
    again = guard.call("client-key", {"to": "ada"}, send, authoritative=True)
    assert again == first
    assert len(outbox.sent) == 1


def test_a_guarded_tool_called_by_a_guarded_tool_is_numbered_within_its_caller() -> None:
    outbox, store = Outbox(), MemoryStore()

    @checkpointed(store)
    def notify(to: str) -> str:
        return outbox.send(to, "notice")

    @checkpointed(store)
    def send_batch(recipients: list[str]) -> list[str]:
        return [notify(to) for to in recipients]

    with tool_call("batch-1"):  # the inner calls never take "batch-1" (a conflict)
        first = send_batch(["ada", "ada", "bob"])
    assert len(outbox.sent) == 3
    with tool_call("batch-2"):
        send_batch(["ada"])
    assert len(outbox.sent) == 4
    with tool_call("batch-1"):
        assert send_batch(["ada", "ada", "bob"]) == first
    assert len(outbox.sent) == 4
