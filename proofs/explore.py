"""Exhaustive bounded exploration of the host protocol users run: every interleaving, every crash.

An explicit-state search (plain Python, breadth first, with a visited set) over one
checkpoint shared by W workers. Each worker runs the runner's own step machine,
:class:`~tool_execution_checkpoint.runner.HostProtocol` (what ``run_once`` drives), one
request per move, so the search covers the code users call, not a model of it: the host
that sends its result (three writes a call), or, with ``--hand-back``, the host whose
delivery is the hand-back (the guard's two writes, the second the hand-back step). From every
state it tries every worker's next request answered every way (a write lands, fails
before landing, or lands with its reply lost; a read succeeds or fails; the tool returns,
raises a handler error, reports its outcome unknown, or stops before it acts (its claim
then released); a send arrives, is refused, or times out having arrived or not), every
worker's crash and restart, a second call after a worker's call ends, every stale replay of a write
computed earlier, the operator's reconciliation of a claim whose owner is gone
(directly, or after marking the execution uncertain; a delivery is confirmed if it
arrived and released if not) and the operator's pruning of a delivered payload. The
real core computes every record.

Checked in every reachable state: the invariants of a world of workers, written once in
:mod:`tool_execution_checkpoint.testing.invariants` for the explorer and the harness (the
tool ran at most once; every delivery carried the call's one answer, the payload produced,
and nothing arrived twice; decide never answers execute for a claimed record; the stored
record validates; a finished call reports the truth), and that only the fence holder
finishes a claim: every fenced transition the table allows from the stored status
refuses a foreign id with FENCE_CONFLICT.

Run ``python proofs/explore.py --workers 2 --depth 14`` (add ``--hand-back`` for the
guard's host; see docs/proofs.md for the bounds run in CI and the thorough ones). A
violation prints the shortest trace that reaches it and exits 1.
"""

from __future__ import annotations

import argparse
import enum
import json
import sys
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import icontract

import tool_execution_checkpoint as tec
from tool_execution_checkpoint.runner import (
    CallState,
    Create,
    Deliver,
    Found,
    Get,
    HostProtocol,
    NotThere,
    Posted,
    Raised,
    Reconcile,
    Request,
    Returned,
    RunOutcome,
    RunTool,
    StoreFault,
    Swap,
    ToolDidNotRun,
    ToolOutcomeUnknown,
    default_error_payload,
)
from tool_execution_checkpoint.table import TABLE, Action, Status
from tool_execution_checkpoint.testing.invariants import (
    Violation,
    check_fences,
    check_outcome,
    check_world,
    note_landed,
)

NOW = "2026-01-01T00:00:00Z"
BINDING = tec.Binding("explore", "call-1", "tool", "1", "sha256:0")
CALLS_PER_WORKER = 2  # a worker's first call, and one more after it ends (a reconnect)
NOT_RUN = json.dumps({"error": "reconciled: the tool did not run"}, separators=(",", ":"))


class Write(enum.Enum):
    """How a write ends."""

    LANDS = "lands"
    FAILS = "fails before landing"
    LOST_REPLY = "lands, reply lost"


class Send(enum.Enum):
    """How a delivery ends."""

    SENT = "sends"
    REFUSED = "is refused (known not sent)"
    ARRIVED = "times out, but it arrived"
    LOST = "times out, and it did not arrive"


@dataclass(frozen=True)
class Worker:
    """A host process: the call it runs (the runner's own state and next request), which
    a crash wipes; ``calls`` survives, as a restarted process takes a fresh token."""

    call: CallState | None = None
    request: Request | None = None
    calls: int = 0


@dataclass(frozen=True)
class State:
    """The store, the workers, and what happened in the world (an
    :class:`~tool_execution_checkpoint.testing.invariants.World`)."""

    stored: tec.Checkpoint | None
    workers: tuple[Worker, ...]
    executions: tuple[tuple[str, str], ...] = ()
    deliveries: tuple[tuple[str, str], ...] = ()
    claimed: bool = False
    reconciled: str | None = None
    history: frozenset[tec.Transition] = frozenset()
    answer: str | None = None
    racing: bool = False


OPTIONS: dict[str, Any] = {
    "clock": lambda: NOW,
    "write_budget": 0.1,
    "monotonic": lambda: 0.0,
    "reconciles": True,
}
"""The explored hosts' options: a budget of three read-backs of a held write, two of them
after a pause, on a clock that does not move (the machine's own count ends them, so states
stay finite)."""

PROTOCOL = HostProtocol(BINDING, **OPTIONS)
"""The host that sends its result: what ``run_once`` drives with a real ``deliver``."""

HAND_BACK = HostProtocol(BINDING, hands_back=True, **OPTIONS)
"""The host whose delivery is the hand-back: what the guard drives (``run_once`` with
``hand_back``), storing its result delivered in one swap (complete_and_deliver)."""


def _write(state: State, transition: tec.Transition, how: Write) -> tuple[State, bool]:
    """Apply a write to the store as ``how`` says (one from revision 0 is a create if
    absent); return the new state and whether it landed."""
    if how is Write.FAILS:
        return state, False
    current = state.stored
    if transition.expected_revision == 0:
        landed = current is None
    else:
        landed = current is not None and current.revision == transition.expected_revision
    if not landed:
        return state, False
    if transition.next.revision != transition.expected_revision + 1:
        raise Violation("a write moved the revision by more than one")
    claimed, answer = note_landed(state, current, transition.next)
    return replace(state, stored=transition.next, claimed=claimed, answer=answer), True


def _set(state: State, index: int, worker: Worker) -> State:
    workers = list(state.workers)
    workers[index] = worker
    return replace(state, workers=tuple(workers))


Moves = Iterator[tuple[str, State]]


def _answers(state: State, index: int, me: Worker) -> Iterator[tuple[str, State, object]]:
    """Every way worker ``index``'s request can be answered: (label, world after, answer)."""
    request, call = me.request, me.call
    assert request is not None
    assert call is not None
    name = f"w{index}"
    if isinstance(request, Create | Swap):
        transition = request.transition if isinstance(request, Swap) else call.pending
        assert transition is not None  # a create is the call's pending write
        what = _describe_write(transition)
        for how in Write:
            after, landed = _write(state, transition, how)
            answer = landed if how is Write.LANDS else StoreFault()
            yield f"{name} {what} ({how.value})", after, answer
        if isinstance(request, Swap) and not request.durable:  # sent unanswered
            after, _ = _write(state, transition, Write.LANDS)
            yield f"{name} {what} (posted, lands)", after, Posted()
            yield f"{name} {what} (posted, lost)", state, Posted()
    elif isinstance(request, Get):
        stored = state.stored
        yield f"{name} reads", state, None if stored is None else stored.to_dict()
        yield f"{name} reads (fails)", state, StoreFault()
    elif isinstance(request, RunTool):
        assert call.record is not None
        assert call.record.execution is not None
        attempt = call.record.execution.attempt_id
        payload = {"by": attempt}
        text = json.dumps(payload, separators=(",", ":"))
        after = replace(state, executions=(*state.executions, (attempt, text)))
        yield f"{name} runs the tool", after, Returned(payload)
        unknown = Raised(ToolOutcomeUnknown("timed out"))
        yield f"{name} runs the tool (its outcome unknown)", after, unknown
        failed = json.dumps(default_error_payload(ValueError()), separators=(",", ":"))
        raised = replace(state, executions=(*state.executions, (attempt, failed)))
        yield f"{name} runs the tool, which raises", raised, Raised(ValueError("failed"))
        yield f"{name} stops before the tool acts", state, Raised(ToolDidNotRun())
    elif isinstance(request, Deliver):
        assert call.record is not None
        assert call.record.delivery is not None
        delivery = (call.record.delivery.delivery_id, request.result.payload_json)
        arrived = replace(state, deliveries=(*state.deliveries, delivery))
        yield f"{name} {Send.SENT.value}", arrived, None
        yield f"{name} {Send.REFUSED.value}", state, Raised(ConnectionRefusedError())
        yield f"{name} {Send.ARRIVED.value}", arrived, Raised(TimeoutError())
        yield f"{name} {Send.LOST.value}", state, Raised(TimeoutError())
    elif isinstance(request, Reconcile):
        yield from _hook_answers(state, name, request.record)
    else:  # Sleep: a pause before a read-back, over at once (the clock does not move)
        yield f"{name} waits", state, None


def _hook_answers(
    state: State, name: str, record: tec.Checkpoint
) -> Iterator[tuple[str, State, object]]:
    """What a reconcile hook may answer about ``record``'s claim: it can always fail to
    tell; it looks the effect up only once the claim's worker is gone, unless racing."""
    yield f"{name} asks the reconcile hook (cannot tell)", state, None
    if not state.racing and _claim_is_live(state, record):
        return
    assert record.execution is not None
    owner = record.execution.attempt_id
    ran = [text for attempt, text in state.executions if attempt == owner]
    if ran:
        yield f"{name} asks the reconcile hook (found)", state, Found(json.loads(ran[0]))
    else:
        settled = replace(state, reconciled=NOT_RUN)
        yield f"{name} asks the reconcile hook (not there)", settled, NotThere(json.loads(NOT_RUN))


def _describe_write(transition: tec.Transition) -> str:
    verb = "creates" if transition.expected_revision == 0 else "swaps"
    return f"{verb} {transition.next.status.value}@{transition.next.revision}"


def _worker_moves(state: State, index: int, protocol: HostProtocol) -> Moves:
    """Every way worker ``index``'s next request can go, through the runner's machine."""
    me = state.workers[index]
    if me.request is None:
        request, call = protocol.start(f"w{index}.{me.calls}")
        me = Worker(call, request, me.calls + 1)
    for label, after, answer in _answers(state, index, me):
        assert me.call is not None
        following, call = protocol.step(me.call, answer)
        if isinstance(following, RunOutcome):
            check_outcome(after, call, following, after.stored)
            worker = Worker(calls=me.calls)
            yield f"{label}; {following.status.value}", _set(after, index, worker)
            continue
        history = after.history
        if isinstance(following, Swap):  # computed now: a stale copy may land later
            history = history | {following.transition}
        worker = Worker(call, following, me.calls)
        yield label, replace(_set(after, index, worker), history=history)


def _claim_is_live(state: State, stored: tec.Checkpoint) -> bool:
    return any(worker.call is not None and worker.call.holds(stored) for worker in state.workers)


def _operator_moves(state: State) -> Iterator[tuple[str, State]]:
    stored = state.stored
    if stored is None:
        return
    action = TABLE.statuses[stored.status].action
    if (
        stored.status is Status.DELIVERED
        and stored.result is not None
        and stored.result.pruned_at is None
    ):
        after, _ = _write(state, tec.prune_result(stored, at=NOW), Write.LANDS)
        yield "operator prunes the payload", after
    if action not in (Action.RECONCILE_EXECUTION, Action.RECONCILE_DELIVERY):
        return
    if not state.racing and _claim_is_live(state, stored):
        return  # the operator waits until the owner is gone (the CLI's minimum age)
    if stored.delivery is not None:
        owner = stored.delivery.delivery_id
        # The operator asks the provider's history: it confirms what arrived and
        # releases only what did not.
        sent = any(delivery_id == owner for delivery_id, _ in state.deliveries)
        finish = tec.complete_delivery if sent else tec.release_delivery
        after, _ = _write(state, finish(stored, delivery_id=owner, at=NOW), Write.LANDS)
        yield f"operator {finish.__name__}", after
        return
    assert stored.execution is not None
    owner = stored.execution.attempt_id
    ran = [payload for attempt, payload in state.executions if attempt == owner]
    text = ran[0] if ran else NOT_RUN
    for mark_first in (False, True):
        record, current = stored, state
        if mark_first:
            if stored.status is not Status.EXECUTING:
                continue
            marked = tec.mark_execution_uncertain(
                stored, attempt_id=owner, at=NOW, reason="operator"
            )
            current, _ = _write(current, marked, Write.LANDS)
            record = marked.next
        done = tec.complete_execution(record, attempt_id=owner, at=NOW, result=json.loads(text))
        current, _ = _write(current, done, Write.LANDS)
        if not ran:
            current = replace(current, reconciled=NOT_RUN)
        label = "marks uncertain, then completes" if mark_first else "completes"
        yield f"operator {label} ({'ran' if ran else 'did not run'})", current


def successors(state: State, protocol: HostProtocol = PROTOCOL) -> Iterator[tuple[str, State]]:
    """Every move from ``state``, labelled for a trace."""
    for index, worker in enumerate(state.workers):
        if worker.calls < CALLS_PER_WORKER or worker.request is not None:
            yield from _worker_moves(state, index, protocol)
        if worker.request is not None:
            restarted = Worker(calls=worker.calls)
            yield f"w{index} crashes and restarts", _set(state, index, restarted)
    for transition in sorted(state.history, key=lambda t: (t.expected_revision, t.next.to_json())):
        after, landed = _write(state, transition, Write.LANDS)
        if landed:
            yield (
                f"a stale worker replays {transition.next.status.value}@{transition.next.revision}",
                after,
            )
    yield from _operator_moves(state)


def check(state: State) -> None:
    """Raise Violation if ``state`` breaks an invariant of a world of workers, or a
    fenced transition lets a foreign id finish the stored record's claim."""
    check_world(state, state.stored, BINDING)
    if state.stored is not None:
        check_fences(state.stored, NOW)


@dataclass
class Report:
    """What a search saw."""

    workers: int
    depth: int
    states: int
    transitions: int
    seconds: float
    violation: str | None = None
    trace: tuple[str, ...] = ()


def explore(
    workers: int, depth: int, protocol: HostProtocol = PROTOCOL, *, racing: bool = False
) -> Report:
    """Breadth-first search of every state within ``depth`` moves of the start, the
    workers running ``protocol`` (the runner's own unless a test passes a broken one).
    ``racing``: the operator also acts on claims whose worker is still going."""
    start = State(stored=None, workers=tuple(Worker() for _ in range(workers)), racing=racing)
    parents: dict[State, tuple[State | None, str]] = {start: (None, "start")}
    frontier: deque[tuple[State, int]] = deque([(start, 0)])
    moves = 0
    began = time.perf_counter()

    def trace(state: State) -> tuple[str, ...]:
        labels: list[str] = []
        current: State | None = state
        while current is not None:
            parent, label = parents[current]
            labels.append(label)
            current = parent
        return tuple(reversed(labels))

    def found(problem: Exception, where: State, note: str = "") -> Report:
        seconds = time.perf_counter() - began
        labels = (*trace(where), note) if note else trace(where)
        return Report(workers, depth, len(parents), moves, seconds, _describe(problem), labels)

    while frontier:
        state, level = frontier.popleft()
        if level == depth:
            continue
        try:
            for label, following in successors(state, protocol):
                moves += 1
                if following in parents:
                    continue
                parents[following] = (state, label)
                try:
                    check(following)
                except BROKEN as problem:
                    return found(problem, following)
                frontier.append((following, level + 1))
        except BROKEN as problem:
            return found(problem, state, "(the next move broke)")
    return Report(workers, depth, len(parents), moves, time.perf_counter() - began)


# What counts as a broken protocol: an invariant, a refusal the core should never make
# on a record it produced itself, or one of the core's own postconditions.
BROKEN = (Violation, tec.CheckpointError, icontract.ViolationError)


def _describe(problem: Exception) -> str:
    first = str(problem).splitlines()[0] if str(problem) else ""
    return f"{type(problem).__name__}: {first}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--depth", type=int, default=14)
    parser.add_argument("--json", help="write the report to this file")
    parser.add_argument(
        "--racing", action="store_true", help="let the operator act on live workers' claims"
    )
    parser.add_argument(
        "--hand-back", action="store_true", help="explore the host that hands back (the guard)"
    )
    args = parser.parse_args(argv)
    protocol = HAND_BACK if args.hand_back else PROTOCOL
    report = explore(args.workers, args.depth, protocol, racing=args.racing)
    host = "hand-back" if args.hand_back else "sending"
    print(
        f"host={host} workers={report.workers} depth={report.depth} states={report.states}"
        f" moves={report.transitions} seconds={report.seconds:.1f}"
    )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(report.__dict__, out, indent=2)
    if report.violation is not None:
        print(f"COUNTEREXAMPLE: {report.violation}")
        for number, label in enumerate(report.trace):
            print(f"  {number:2d}. {label}")
        return 1
    print("no counterexample")
    return 0


if __name__ == "__main__":
    sys.exit(main())
