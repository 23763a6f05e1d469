"""checkpointed and ToolGuard: a tool guarded in one line runs at most once per call id
and hands back the same typed result on every replay."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import sys
import threading
import typing
import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, TypedDict, cast

import pydantic
import pytest

from counting_store import CountingStore, Write
from test_store import AsyncMemoryStore
from tool_execution_checkpoint import (
    AsyncSQLiteStore,
    CallInFlight,
    CallNeedsReconciliation,
    CallResultPruned,
    CallStoreUnavailable,
    Checkpoint,
    CheckpointError,
    ErrorCode,
    MemoryStore,
    SQLiteStore,
    Status,
    StoreError,
    ToolDidNotRun,
    ToolGuard,
    ToolOutcomeUnknown,
    ToolRaisedEarlier,
    checkpoint_key,
    checkpointed,
    claim_delivery,
    complete_delivery,
    complete_execution,
    create_claimed,
    current_call_id,
    prune_result,
    result_codec,
    run_once,
    tool_call,
)
from tool_execution_checkpoint.guard_base import Live
from tool_execution_checkpoint.guard_calls import run_tool
from tool_execution_checkpoint.stores.threaded import ThreadedStore
from tool_execution_checkpoint.testing.conformance import leaks

SECRET = "SECRET-a1b2c3"


class Receipt(pydantic.BaseModel):
    message_id: str
    recipients: list[str]


@dataclasses.dataclass(frozen=True)
class Line:
    sku: str
    cents: int


@dataclasses.dataclass(frozen=True)
class Invoice:
    number: int
    lines: list[Line]
    total: Line


class Summary(TypedDict):
    sent: int
    note: str


class Outbox:
    """Counts a tool's effects."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def send(self, to: str, body: str) -> Receipt:
        self.sent.append((to, body))
        return Receipt(message_id=f"m-{len(self.sent)}", recipients=[to])


def test_a_replay_returns_the_stored_result_as_the_same_type_without_running() -> None:
    store, outbox = MemoryStore(), Outbox()

    @checkpointed(store)
    def send_email(to: str, body: str) -> Receipt:
        return outbox.send(to, body)

    with tool_call("toolu_1"):
        first = send_email("ada@example.com", SECRET)
        again = send_email("ada@example.com", SECRET)
    assert outbox.sent == [("ada@example.com", SECRET)]
    assert isinstance(again, Receipt)
    assert again == first == Receipt(message_id="m-1", recipients=["ada@example.com"])
    with tool_call("toolu_2"):
        assert send_email("ada@example.com", SECRET).message_id == "m-2"
    assert len(outbox.sent) == 2


def test_the_first_run_hands_back_the_live_value_itself() -> None:
    produced: list[Receipt] = []

    @checkpointed(MemoryStore())
    def send_email(to: str) -> Receipt:
        produced.append(Receipt(message_id="m-1", recipients=[to]))
        return produced[-1]

    with tool_call("toolu_1"):
        assert send_email("ada@example.com") is produced[0]


@pytest.mark.parametrize(
    ("annotation", "value"),
    [
        (Invoice, Invoice(7, [Line("a", 1), Line("b", 2)], Line("t", 3))),
        (Summary, Summary(sent=2, note="ok")),
        (list[Receipt], [Receipt(message_id="m", recipients=[])]),
        (dict[str, int], {"a": 1}),
        (float, 0.1 + 0.2),
        (int, 2**63 + 1),
        (str | None, None),
        (Any, {"nested": [1, 2.5, "x", None, True]}),
    ],
)
def test_every_annotated_result_survives_the_replay_exactly(annotation: Any, value: Any) -> None:
    runs = 0

    def tool() -> Any:
        nonlocal runs
        runs += 1
        return value

    tool.__annotations__["return"] = annotation
    guarded = checkpointed(MemoryStore())(tool)
    with tool_call("toolu_1"):
        guarded()
        replayed = guarded()
    assert runs == 1
    assert replayed == value
    assert type(replayed) is type(value)


def test_without_pydantic_a_dataclass_is_rebuilt_from_its_fields(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "pydantic", None)
    codec = result_codec(Invoice)
    invoice = Invoice(7, [Line("a", 1)], Line("t", 1))
    payload = codec.encode(invoice)
    assert payload == {
        "number": 7,
        "lines": [{"sku": "a", "cents": 1}],
        "total": {"sku": "t", "cents": 1},
    }
    rebuilt = codec.decode(payload)
    assert rebuilt.total == Line("t", 1)
    assert rebuilt.number == 7


def test_a_tool_error_is_raised_as_itself_then_as_its_stored_type_never_rerun() -> None:
    store = MemoryStore()
    runs = 0
    error = ValueError(SECRET)

    @checkpointed(store)
    def charge(card: str) -> str:  # noqa: ARG001 - the argument is fingerprinted
        nonlocal runs
        runs += 1
        raise error

    with tool_call("toolu_1"):
        with pytest.raises(ValueError, match=SECRET) as first:
            charge("4242")
        with pytest.raises(ToolRaisedEarlier) as replayed:
            charge("4242")
    assert first.value is error
    assert replayed.value.error_type == "ValueError"
    assert SECRET not in str(replayed.value)
    assert runs == 1
    (key,) = store.keys()
    stored = store.get(key)
    assert stored is not None
    assert stored["result"]["payload"] == {"raised": {"type": "ValueError"}}


def test_an_unknown_outcome_needs_reconciliation_on_every_call() -> None:
    runs = 0

    @checkpointed(MemoryStore())
    def charge(card: str) -> str:  # noqa: ARG001 - the argument is fingerprinted
        nonlocal runs
        runs += 1
        raise ToolOutcomeUnknown("the gateway timed out after the request left")

    with tool_call("toolu_1"):
        for _ in range(2):
            with pytest.raises(CallNeedsReconciliation) as caught:
                charge("4242")
            assert caught.value.reason == "the gateway timed out after the request left"
    assert runs == 1


def test_a_result_that_cannot_be_stored_is_uncertain_not_an_error_result() -> None:
    runs = 0

    @checkpointed(MemoryStore())
    def make() -> Any:
        nonlocal runs
        runs += 1
        return object()

    with tool_call("toolu_1"):
        for _ in range(2):
            with pytest.raises(CallNeedsReconciliation) as caught:
                make()
            assert caught.value.outcome.record is not None
            assert caught.value.outcome.record.status is Status.UNCERTAIN
    assert runs == 1


def test_a_call_in_flight_is_not_run_again() -> None:
    runs = 0
    inner: list[BaseException] = []

    def same_call_from_another_worker(card: str) -> None:
        with tool_call("toolu_1"):
            try:
                charge(card)
            except CallInFlight as error:
                inner.append(error)

    @checkpointed(MemoryStore())
    def charge(card: str) -> str:
        nonlocal runs
        runs += 1
        worker = threading.Thread(target=same_call_from_another_worker, args=(card,))
        worker.start()  # the same call arriving while this one runs
        worker.join()
        return "charged"

    with tool_call("toolu_1"):
        assert charge("4242") == "charged"
    assert runs == 1
    assert len(inner) == 1


def test_other_arguments_under_the_same_call_id_are_a_conflict() -> None:
    store, outbox = MemoryStore(), Outbox()

    @checkpointed(store)
    def send_email(to: str, body: str = "hi") -> Receipt:
        return outbox.send(to, body)

    with tool_call("toolu_1"):
        send_email("ada@example.com")
        send_email(to="ada@example.com", body="hi")  # defaults bound: the same call
        with pytest.raises(CheckpointError) as caught:
            send_email("eve@example.com")
    assert caught.value.code is ErrorCode.BINDING_CONFLICT
    assert "eve@example.com" not in str(caught.value)
    assert len(outbox.sent) == 1


def test_excluded_parameters_are_not_fingerprinted() -> None:
    outbox = Outbox()

    @checkpointed(MemoryStore(), exclude=("context",))
    def send_email(context: object, to: str) -> Receipt:  # noqa: ARG001 - excluded
        return outbox.send(to, "hi")

    with tool_call("toolu_1"):
        send_email(object(), "ada@example.com")
        send_email(object(), "ada@example.com")
    assert len(outbox.sent) == 1


def test_a_context_object_left_in_the_fingerprint_is_refused_by_type_only() -> None:
    @checkpointed(MemoryStore())
    def send_email(context: object, to: str) -> str:  # noqa: ARG001 - fingerprinted
        return to

    with tool_call("toolu_1"), pytest.raises(CheckpointError) as caught:
        send_email(object(), SECRET)
    assert caught.value.code is ErrorCode.PAYLOAD_NOT_JSON
    assert SECRET not in str(caught.value)


def test_the_call_id_can_be_read_from_the_arguments() -> None:
    outbox = Outbox()

    @dataclasses.dataclass
    class Context:
        tool_call_id: str

    @checkpointed(
        MemoryStore(),
        exclude=("context",),
        call_id=lambda bound: bound.arguments["context"].tool_call_id,
    )
    def send_email(context: Context, to: str) -> Receipt:  # noqa: ARG001 - the call id
        return outbox.send(to, "hi")

    send_email(Context("call_1"), "ada@example.com")
    send_email(Context("call_1"), "ada@example.com")
    send_email(Context("call_2"), "ada@example.com")
    assert len(outbox.sent) == 2


def test_a_call_without_a_call_id_is_refused_before_anything_runs() -> None:
    runs = 0

    @checkpointed(MemoryStore())
    def tool() -> None:
        nonlocal runs
        runs += 1

    assert current_call_id() is None
    with pytest.raises(CheckpointError) as caught:
        tool()
    assert caught.value.code is ErrorCode.INVALID_ARGUMENT
    assert caught.value.field == "call_id"
    assert runs == 0


def test_tool_call_blocks_nest_and_restore() -> None:
    with tool_call("outer"):
        with tool_call("inner"):
            assert current_call_id() == "inner"
        assert current_call_id() == "outer"
    assert current_call_id() is None


def test_bad_decorations_are_refused() -> None:
    def tool(to: str) -> str:
        return to

    with pytest.raises(CheckpointError) as caught:
        checkpointed(MemoryStore(), exclude=("ctx",))(tool)
    assert caught.value.field == "exclude"
    with pytest.raises(CheckpointError) as caught:
        checkpointed(AsyncMemoryStore())(tool)
    assert caught.value.field == "store"


def test_a_sync_guard_call_refuses_an_async_store_before_the_tool_runs() -> None:
    store = AsyncMemoryStore()
    runs: list[str] = []
    with pytest.raises(CheckpointError) as caught:
        ToolGuard(store, "send").call("toolu_1", {}, lambda: runs.append("sent"))
    assert str(caught.value) == (
        "INVALID_ARGUMENT: store: is async: a sync call cannot await it (use the async entry point)"
    )
    assert runs == []
    key = checkpoint_key(ToolGuard(store, "send").binding("toolu_1", {}))
    assert asyncio.run(store.get(key)) is None


def test_the_wrapper_keeps_the_signature_frameworks_read() -> None:
    def send_email(to: str, body: str = "hi") -> Receipt:  # noqa: ARG001 - never called
        """Send one e-mail."""
        raise AssertionError

    guarded = checkpointed(MemoryStore())(send_email)
    assert inspect.signature(guarded) == inspect.signature(send_email)
    assert typing.get_type_hints(guarded) == typing.get_type_hints(send_email)
    assert guarded.__name__ == "send_email"
    assert guarded.__doc__ == "Send one e-mail."
    assert not inspect.iscoroutinefunction(guarded)


def test_an_async_tool_is_guarded_by_an_async_wrapper(tmp_path: Path) -> None:
    outbox = Outbox()

    async def main() -> list[Receipt]:
        store = AsyncSQLiteStore(tmp_path / "checkpoints.db")

        @checkpointed(store)
        async def send_email(to: str) -> Receipt:
            await asyncio.sleep(0)
            return outbox.send(to, "hi")

        assert inspect.iscoroutinefunction(send_email)
        with tool_call("toolu_1"):
            results = [await send_email("ada@example.com") for _ in range(2)]
        await store.aclose()
        return results

    first, again = asyncio.run(main())
    assert again == first
    assert isinstance(again, Receipt)
    assert len(outbox.sent) == 1


def test_a_cancelled_async_tool_is_uncertain_and_never_rerun() -> None:
    runs = 0

    async def main() -> None:
        @checkpointed(AsyncMemoryStore())
        async def slow() -> str:
            nonlocal runs
            runs += 1
            await asyncio.sleep(10)
            return "done"

        with tool_call("toolu_1"):
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(slow(), 0.01)
            with pytest.raises(CallNeedsReconciliation) as caught:
                await slow()
        assert caught.value.reason == "cancelled"

    asyncio.run(main())
    assert runs == 1


def test_call_async_takes_a_sync_tool_s_value_as_it_is() -> None:
    effects: list[str] = []

    def charge() -> dict[str, str]:  # a sync tool handed to the async call
        effects.append("charged")
        return {"receipt": "r-1"}

    guard, tool = ToolGuard(MemoryStore(), tool_name="charge"), cast(Any, charge)

    async def main() -> tuple[Any, Any]:
        first = await guard.call_async("c1", {"amount": 5}, tool)
        again = await guard.call_async("c1", {"amount": 5}, tool)
        return first, again

    assert asyncio.run(main()) == ({"receipt": "r-1"}, {"receipt": "r-1"})
    assert effects == ["charged"]


class Retry(Exception):
    """A framework's control flow."""


def test_a_pass_through_exception_is_re_raised_and_leaves_the_call_uncertain() -> None:
    @checkpointed(MemoryStore(), pass_through=(Retry,))
    def tool() -> str:
        raise Retry

    with tool_call("toolu_1"):
        with pytest.raises(Retry):
            tool()
        with pytest.raises(CallNeedsReconciliation) as caught:
            tool()
    assert caught.value.reason == "passed through: Retry"


AT = "2026-12-03T00:00:00Z"


def _guarded_send(store: MemoryStore, outbox: Outbox) -> Any:
    @checkpointed(store)
    def send_email(to: str) -> Receipt:
        return outbox.send(to, "hi")

    return send_email


def _left_in(status: Status, stored: Checkpoint) -> MemoryStore:
    """A store holding ``stored``'s call, with its payload, left in ``status`` by a host
    that stores, claims and delivers in separate writes (or by an operator)."""
    assert stored.execution is not None
    assert stored.result is not None
    attempt, payload = stored.execution.attempt_id, stored.result.payload
    steps: list[Any] = [
        lambda r: complete_execution(r, attempt_id=attempt, at=AT, result=payload),
        lambda r: claim_delivery(r, delivery_id="d", at=AT),
        lambda r: complete_delivery(r, delivery_id="d", at=AT),
    ]
    store = MemoryStore()
    key = checkpoint_key(stored.binding)
    record = create_claimed(stored.binding, attempt_id=attempt, at=AT).next
    assert store.create_if_absent(key, record)
    for step in steps:
        if record.status is status:
            break
        made = step(record)
        assert store.compare_and_swap(key, made.expected_revision, made.next)
        record = made.next
    assert record.status is status
    return store


@pytest.mark.parametrize("status", [Status.COMPLETED, Status.DELIVERING, Status.DELIVERED])
def test_a_stored_result_is_handed_back_whatever_phase_the_record_is_in(status: Status) -> None:
    """A crash right after the guard's second write leaves delivered; an operator's
    completion leaves completed; a host that sends leaves delivering when it dies
    mid-send. Each is answered from the stored payload, and the tool never runs again."""
    store, outbox = MemoryStore(), Outbox()
    with tool_call("toolu_1"):
        first = _guarded_send(store, outbox)("ada@example.com")
    (key,) = store.keys()
    stored = Checkpoint.from_dict(store.get(key) or {})
    assert stored.status is Status.DELIVERED  # the guard's second write records it
    left = _left_in(status, stored)
    with tool_call("toolu_1"):
        assert _guarded_send(left, outbox)("ada@example.com") == first
    assert len(outbox.sent) == 1
    after = Checkpoint.from_dict(left.get(key) or {})
    assert after.status is (Status.DELIVERING if status is Status.DELIVERING else Status.DELIVERED)
    assert after.result is not None
    assert stored.result is not None
    assert after.result.payload_json == stored.result.payload_json


def test_a_sync_guarded_call_makes_two_writes() -> None:
    """A create of the record claimed, then one swap that stores the result delivered,
    both durable; a replay's create finds the record, and it swaps nothing."""
    store = CountingStore()

    @checkpointed(store)
    def add(a: int, b: int) -> int:
        return a + b

    with tool_call("toolu_1"):
        assert add(1, 2) == 3
    assert store.writes == [
        Write("create", Status.EXECUTING, True),
        Write("swap", Status.DELIVERED, True),
    ]
    (key,) = store.keys()
    stored = store.get(key)
    with tool_call("toolu_1"):
        assert add(1, 2) == 3
    assert store.writes[2:] == [Write("create", Status.EXECUTING, True)]
    assert store.get(key) == stored


def test_an_async_guarded_call_makes_two_writes() -> None:
    counting = CountingStore()
    store = ThreadedStore(counting)

    @checkpointed(store)
    async def add(a: int, b: int) -> int:
        return a + b

    async def calls() -> list[int]:
        answers = []
        for _ in range(2):
            with tool_call("toolu_1"):
                answers.append(await add(1, 2))
        await store.aclose()
        return answers

    assert asyncio.run(calls()) == [3, 3]
    assert counting.writes == [
        Write("create", Status.EXECUTING, True),
        Write("swap", Status.DELIVERED, True),
        Write("create", Status.EXECUTING, True),  # the replay's, which finds the record
    ]


def test_a_pruned_result_is_not_answered() -> None:
    store = MemoryStore()

    @checkpointed(store)
    def tool() -> int:
        return 1

    with tool_call("toolu_1"):
        tool()
        (key,) = store.keys()
        stored = Checkpoint.from_dict(store.get(key) or {})
        pruned = prune_result(stored, at="2026-12-03T00:00:00Z")
        assert store.compare_and_swap(key, pruned.expected_revision, pruned.next)
        with pytest.raises(CallResultPruned):
            tool()


class Down(MemoryStore):
    def create_if_absent(self, key: str, record: Checkpoint) -> bool:  # noqa: ARG002
        raise StoreError("injected: down")

    def get(self, key: str) -> Any:  # noqa: ARG002
        raise StoreError("injected: down")


def test_a_store_that_is_down_runs_nothing_and_says_so() -> None:
    runs = 0

    @checkpointed(Down())
    def tool() -> int:
        nonlocal runs
        runs += 1
        return 1

    with tool_call("toolu_1"), pytest.raises(CallStoreUnavailable):
        tool()
    assert runs == 0


def test_a_stored_payload_of_another_shape_is_an_invalid_checkpoint() -> None:
    store = MemoryStore()
    guard = ToolGuard(store, tool_name="tool")
    # A result completed by hand without the envelope.
    run_once(store, guard.binding("toolu_1", {}), lambda: {"raw": SECRET}, lambda _: None)
    with pytest.raises(CheckpointError) as caught:
        guard.call("toolu_1", {}, lambda: None)
    assert caught.value.code is ErrorCode.INVALID_CHECKPOINT
    assert SECRET not in str(caught.value)


def test_the_guard_works_on_the_embedded_store_across_restarts(tmp_path: Path) -> None:
    outbox = Outbox()
    path = tmp_path / "checkpoints.db"
    for _ in range(2):  # two host processes, one after the other, on the same file
        store = SQLiteStore(path)
        send_email = checkpointed(store)(Outbox.send.__get__(outbox))
        with tool_call("toolu_1"):
            assert send_email("ada@example.com", "hi").message_id == "m-1"
        store.close()
    assert len(outbox.sent) == 1


class NeedsApproval(Exception):
    """A framework's request for approval, raised before the tool acts."""


def test_a_tool_that_stopped_before_acting_runs_on_the_next_call() -> None:
    outbox, approved = Outbox(), list[bool]()

    @checkpointed(MemoryStore(), not_run=(NeedsApproval,))
    def send_email(to: str) -> Receipt:
        if not approved:
            raise NeedsApproval
        return outbox.send(to, "hi")

    with tool_call("toolu_1"):
        with pytest.raises(NeedsApproval):
            send_email("ada@example.com")
        approved.append(True)
        first = send_email("ada@example.com")  # the resume, after approval
        assert send_email("ada@example.com") == first  # and a replay
    assert len(outbox.sent) == 1


def test_tool_did_not_run_is_the_default_not_run_exception() -> None:
    runs = 0

    @checkpointed(MemoryStore())
    def tool() -> int:
        nonlocal runs
        runs += 1
        if runs == 1:
            raise ToolDidNotRun
        return runs

    with tool_call("toolu_1"):
        with pytest.raises(ToolDidNotRun):
            tool()
        assert tool() == 2
        assert tool() == 2
    assert runs == 2


# --- no value in any exception chain ---------------------------------------------------------

CHAIN_SECRET = "guard-chain-secret-7f3a"


class _CannotEncode:
    """A codec whose refusal quotes the value, as pydantic's errors do."""

    def encode(self, value: Any) -> Any:
        raise ValueError(f"cannot encode {value!r}")

    def decode(self, payload: Any) -> Any:
        return payload


class _CannotDecode:
    """A codec that stores the value and, on a replay, refuses it quoting it."""

    def encode(self, value: Any) -> Any:
        return value

    def decode(self, payload: Any) -> Any:
        raise ValueError(f"cannot rebuild {payload!r}")


def test_a_result_that_cannot_be_encoded_leaves_it_nowhere_in_the_chain() -> None:
    """The encoder's error once stayed as the suppressed context of ToolOutcomeUnknown."""
    with pytest.raises(ToolOutcomeUnknown) as caught:
        run_tool(Live(), lambda: {"to": CHAIN_SECRET}, _CannotEncode(), "default", "toolu_1")
    assert leaks(caught.value, CHAIN_SECRET) is None
    assert "ValueError" in str(caught.value)
    assert caught.value.__context__ is None


def test_a_stored_result_that_does_not_rebuild_is_invalid_naming_no_value() -> None:
    store = MemoryStore()

    @checkpointed(store, name="lookup", codec=_CannotDecode())
    def lookup() -> dict[str, str]:
        return {"note": CHAIN_SECRET}

    @checkpointed(store, name="lookup")
    def lookup_as_a_model() -> Receipt:  # the same call, read back as a model
        raise AssertionError("a replay never runs the tool")

    with tool_call("chain-1"):
        assert lookup() == {"note": CHAIN_SECRET}
        with pytest.raises(CheckpointError) as caught:
            lookup()
    assert caught.value.code is ErrorCode.INVALID_CHECKPOINT
    assert leaks(caught.value, CHAIN_SECRET) is None
    with tool_call("chain-1"), pytest.raises(CheckpointError) as by_pydantic:
        lookup_as_a_model()
    assert by_pydantic.value.code is ErrorCode.INVALID_CHECKPOINT
    assert "ValidationError" in str(by_pydantic.value)
    assert leaks(by_pydantic.value, CHAIN_SECRET) is None


class GuardChainSecret7f3a:
    """A return type pydantic cannot build a schema for; its name is the secret."""


def test_an_annotation_that_cannot_be_stored_names_it_nowhere_in_the_chain() -> None:
    """The refusals were raised inside the ``except`` with ``from None``: suppressed, the
    NameError and pydantic's error (each naming the type) stayed as ``__context__``."""
    secret = GuardChainSecret7f3a.__name__

    def unresolvable() -> GuardChainSecret7f3aMissing:  # type: ignore[name-defined]  # noqa: F821
        raise AssertionError("never run")

    with pytest.raises(CheckpointError) as unresolved:
        checkpointed(MemoryStore())(unresolvable)
    with pytest.raises(CheckpointError) as refused:
        result_codec(GuardChainSecret7f3a)
    assert "cannot be resolved" in str(unresolved.value)
    assert "pydantic cannot store" in str(refused.value)
    for caught in (unresolved, refused):
        assert caught.value.code is ErrorCode.INVALID_ARGUMENT
        assert leaks(caught.value, secret) is None
        assert (caught.value.__context__, caught.value.__cause__) == (None, None)


def test_a_generator_function_is_refused_when_decorated() -> None:
    def rows(to: str) -> Iterator[str]:
        yield to

    async def stream(to: str) -> AsyncIterator[str]:
        yield to

    for tool in (rows, stream):
        with pytest.raises(CheckpointError) as caught:
            checkpointed(MemoryStore())(tool)
        assert caught.value.code is ErrorCode.INVALID_ARGUMENT
        assert caught.value.field == "tool"


def test_a_dict_returned_for_a_model_is_stored_as_the_model_and_never_quoted() -> None:
    store = MemoryStore()

    @checkpointed(store)
    def send_email(to: str) -> Receipt:
        return {"message_id": SECRET, "recipients": [to]}  # type: ignore[return-value]

    @checkpointed(store)
    def broken(to: str) -> Receipt:  # noqa: ARG001 - fingerprinted
        return {"message": SECRET}  # type: ignore[return-value]

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with tool_call("toolu_1"):
            first = send_email("ada@example.com")
            again = send_email("ada@example.com")
        with tool_call("toolu_2"), pytest.raises(CallNeedsReconciliation) as caught:
            broken("ada@example.com")
    assert cast(object, first) == {"message_id": SECRET, "recipients": ["ada@example.com"]}
    assert again == Receipt(message_id=SECRET, recipients=["ada@example.com"])
    assert not [warning for warning in seen if SECRET in str(warning.message)]
    assert not leaks(caught.value, SECRET)


def _completed_by_an_operator(payload: Any) -> tuple[MemoryStore, str]:
    """A store whose guarded call was left uncertain, then completed by an operator with
    ``payload`` (what `tool-checkpoint reconcile --complete` stores)."""
    store = MemoryStore()

    @checkpointed(store)
    def charge(amount: int) -> dict[str, str]:
        raise ToolOutcomeUnknown(f"the provider timed out charging {amount}")

    with tool_call("call-op"), pytest.raises(CallNeedsReconciliation):
        charge(5)
    (key,) = store.keys()
    stored = Checkpoint.from_dict(store.get(key) or {})
    assert stored.status is Status.UNCERTAIN
    assert stored.execution is not None
    made = complete_execution(stored, attempt_id=stored.execution.attempt_id, at=AT, result=payload)
    assert store.compare_and_swap(key, made.expected_revision, made.next)
    return store, key


def _replayed(store: MemoryStore) -> Any:
    ran: list[int] = []

    @checkpointed(store)
    def charge(amount: int) -> dict[str, str]:
        ran.append(amount)
        return {"charge": "new"}

    try:
        with tool_call("call-op"):
            return charge(5)
    finally:
        assert ran == []  # never run again


def test_an_operators_error_payload_is_the_tools_error_to_the_guard() -> None:
    """`reconcile --complete-error TYPE` stores the runner's error payload,
    {"error": {"type": TYPE}}: the guard raises it as the tool's earlier error."""
    store, key = _completed_by_an_operator({"error": {"type": "CardDeclined"}})
    with pytest.raises(ToolRaisedEarlier, match="CardDeclined"):
        _replayed(store)
    assert (store.get(key) or {})["status"] == "delivered"


def test_an_operators_returned_payload_is_the_tools_result_to_the_guard() -> None:
    store, _ = _completed_by_an_operator({"returned": {"charge": "ch_1"}})
    assert _replayed(store) == {"charge": "ch_1"}


@pytest.mark.parametrize("payload", [{"charge": "ch_1"}, {"returned": 1, "raised": 2}, 7])
def test_a_payload_the_guard_cannot_read_is_refused_and_left_completed(payload: Any) -> None:
    """Never recorded delivered with an answer the framework was not given: the delivery
    claim is released (the plain hand-back would have marked it delivered for good)."""
    store, key = _completed_by_an_operator(payload)
    for _ in range(2):  # refused each time, the record unchanged
        with pytest.raises(CheckpointError) as refused:
            _replayed(store)
        assert refused.value.code is ErrorCode.INVALID_CHECKPOINT
        assert "left completed" in str(refused.value)
        assert (store.get(key) or {})["status"] == "completed"
