"""Exhaustive bounded exploration of the protocol: every interleaving, every crash.

An explicit-state search (plain Python, breadth first, with a visited set) over one
checkpoint shared by W workers that follow the host protocol of the README one store
operation per step. From every state it tries every worker's next step (each write in
three versions: it lands, it fails before landing, it lands but the reply is lost), every
worker's crash and restart, every stale replay of a transition computed earlier, the
operator's reconciliation of a claim whose owner is gone (directly, or after marking the
execution uncertain) and the operator's pruning of a delivered payload. The real core
(the transition table and the functions of ``tool_execution_checkpoint``) computes every
record, so the search checks the implementation, not a model of it.

Checked in every reachable state:
- the tool ran at most once;
- a stored payload is the one the single execution produced (or the operator's "did not
  run" payload), until a delivered one is pruned;
- every delivery carried exactly that payload;
- decide never answers execute once the record was claimed;
- only the fence holder finishes a claim: every fenced transition the table allows from
  the stored status refuses a foreign id with FENCE_CONFLICT;
- the stored record validates and survives a round trip through its persisted form.

Run ``python proofs/explore.py --workers 2 --depth 14`` (see proofs/README.md for the
bounds run in CI and the thorough ones). A violation prints the shortest trace that
reaches it and exits 1.
"""

from __future__ import annotations

import argparse
import enum
import json
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import icontract

import tool_execution_checkpoint as tec
from tool_execution_checkpoint.table import TABLE, Action, Fence, Status

NOW = "2026-01-01T00:00:00Z"
BINDING = tec.Binding("explore", "call-1", "tool", "1", "sha256:0")
NOT_RUN = json.dumps({"error": "reconciled: the tool did not run"}, separators=(",", ":"))


class Step(enum.Enum):
    """What a worker's next step does."""

    IDLE = "create if absent"
    LOAD = "load and decide"
    CLAIM = "CAS the execution claim"
    RUN = "run the tool"
    COMPLETE = "CAS the result"
    RECHECK = "read back the result"
    CLAIM_DELIVERY = "CAS the delivery claim"
    SEND = "send"
    FINISH = "CAS the delivery outcome"
    RECHECK_DELIVERY = "read back the delivery outcome"
    DONE = "done"


class Write(enum.Enum):
    """How a write ends."""

    LANDS = "lands"
    FAILS = "fails before landing"
    LOST_REPLY = "lands, reply lost"


@dataclass(frozen=True)
class Worker:
    """A host process: only its memory, which a crash wipes (its id counter survives,
    as a restarted process takes a fresh id)."""

    step: Step = Step.IDLE
    record: tec.Checkpoint | None = None
    pending: tec.Transition | None = None
    attempt: str | None = None
    delivery: str | None = None
    payload: str | None = None
    sent: bool = False
    ids: int = 0


@dataclass(frozen=True)
class State:
    """The store, the workers, and what happened in the world."""

    stored: tec.Checkpoint | None
    workers: tuple[Worker, ...]
    executions: tuple[tuple[str, str], ...] = ()
    deliveries: tuple[str, ...] = ()
    claimed: bool = False
    reconciled: str | None = None
    history: frozenset[tec.Transition] = frozenset()


class Violation(AssertionError):
    """A broken invariant, with the trace that reached it."""


def _write(state: State, transition: tec.Transition | None, how: Write) -> tuple[State, bool]:
    """Apply a write to the store as ``how`` says; return the new state and what the
    writer learns (True only if it saw its write land)."""
    if how is Write.FAILS:
        return state, False
    if transition is None:
        landed = state.stored is None
        stored = tec.create_checkpoint(BINDING, created_at=NOW) if landed else state.stored
    else:
        current = state.stored
        landed = current is not None and current.revision == transition.expected_revision
        stored = transition.next if landed else current
        if landed and current is not None and transition.next.revision != current.revision + 1:
            raise Violation("a transition moved the revision by more than one")
    claimed = state.claimed or (
        landed and transition is not None and transition.next.status is Status.EXECUTING
    )
    state = replace(state, stored=stored, claimed=claimed)
    return state, landed and how is Write.LANDS


def _set(state: State, index: int, worker: Worker) -> State:
    workers = list(state.workers)
    workers[index] = worker
    return replace(state, workers=tuple(workers))


def _remember(state: State, transition: tec.Transition) -> State:
    return replace(state, history=state.history | {transition})


Moves = Iterator[tuple[str, State]]


def _on_idle(state: State, index: int, me: Worker) -> Moves:
    for how in Write:
        after, _ = _write(state, None, how)
        worker = replace(me, step=Step.LOAD)
        yield f"w{index} creates the record ({how.value})", _set(after, index, worker)


def _on_load(state: State, index: int, me: Worker) -> Moves:
    name = f"w{index}"
    if state.stored is None:
        yield f"{name} loads nothing", _set(state, index, replace(me, step=Step.IDLE))
        return
    decision = tec.decide_checkpoint(state.stored, BINDING)
    claim_id = f"{name}.{me.ids}"
    if decision.action is Action.EXECUTE:
        claim = tec.claim_execution(decision.checkpoint, attempt_id=claim_id, at=NOW)
        worker = replace(me, step=Step.CLAIM, pending=claim, attempt=claim_id, ids=me.ids + 1)
    elif decision.action is Action.DELIVER:
        claim = tec.claim_delivery(decision.checkpoint, delivery_id=claim_id, at=NOW)
        worker = replace(
            me, step=Step.CLAIM_DELIVERY, pending=claim, delivery=claim_id, ids=me.ids + 1
        )
    else:
        worker = Worker(ids=me.ids, step=Step.DONE)
        yield f"{name} decides {decision.action.value}", _set(state, index, worker)
        return
    yield f"{name} decides {decision.action.value}", _remember(_set(state, index, worker), claim)


def _on_claim(state: State, index: int, me: Worker) -> Moves:
    assert me.pending is not None
    granted = Step.RUN if me.step is Step.CLAIM else Step.SEND
    for how in Write:
        after, won = _write(state, me.pending, how)
        worker = (
            replace(me, step=granted, record=me.pending.next)
            if won
            else replace(me, step=Step.LOAD)
        )
        yield f"w{index} {me.step.value} ({how.value})", _set(after, index, worker)


def _on_run(state: State, index: int, me: Worker) -> Moves:
    assert me.record is not None
    assert me.attempt is not None
    payload = {"by": me.attempt}
    text = json.dumps(payload, separators=(",", ":"))
    done = tec.complete_execution(me.record, attempt_id=me.attempt, at=NOW, result=payload)
    worker = replace(me, step=Step.COMPLETE, pending=done, payload=text)
    after = replace(state, executions=(*state.executions, (me.attempt, text)))
    yield f"w{index} runs the tool", _remember(_set(after, index, worker), done)


def _on_finish(state: State, index: int, me: Worker) -> Moves:
    assert me.pending is not None
    completing = me.step is Step.COMPLETE
    for how in Write:
        after, won = _write(state, me.pending, how)
        if won:
            worker = (
                replace(me, step=Step.LOAD) if completing else Worker(ids=me.ids, step=Step.DONE)
            )
        else:
            worker = replace(me, step=Step.RECHECK if completing else Step.RECHECK_DELIVERY)
        yield f"w{index} {me.step.value} ({how.value})", _set(after, index, worker)


def _on_recheck(state: State, index: int, me: Worker) -> Moves:
    stored = state.stored
    assert stored is not None
    owned = stored.execution is not None and stored.execution.attempt_id == me.attempt
    if owned and me.attempt is not None and stored.status in (Status.EXECUTING, Status.UNCERTAIN):
        assert me.payload is not None
        result = json.loads(me.payload)
        done = tec.complete_execution(stored, attempt_id=me.attempt, at=NOW, result=result)
        worker = replace(me, step=Step.COMPLETE, pending=done)
        yield f"w{index} reads back: still its claim", _remember(_set(state, index, worker), done)
    else:
        yield f"w{index} reads back: moved on", _set(state, index, replace(me, step=Step.LOAD))


def _on_send(state: State, index: int, me: Worker) -> Moves:
    record = me.record
    assert record is not None
    assert record.result is not None
    assert me.delivery is not None
    for sent in (True, False):
        finish = tec.complete_delivery if sent else tec.release_delivery
        outcome = finish(record, delivery_id=me.delivery, at=NOW)
        after = state
        if sent:
            after = replace(state, deliveries=(*state.deliveries, record.result.payload_json))
        worker = replace(me, step=Step.FINISH, pending=outcome, sent=sent)
        label = "sends" if sent else "fails to send (known)"
        yield f"w{index} {label}", _remember(_set(after, index, worker), outcome)


def _on_recheck_delivery(state: State, index: int, me: Worker) -> Moves:
    stored = state.stored
    assert stored is not None
    owned = stored.delivery is not None and stored.delivery.delivery_id == me.delivery
    if owned and me.delivery is not None and stored.status is Status.DELIVERING:
        finish = tec.complete_delivery if me.sent else tec.release_delivery
        outcome = finish(stored, delivery_id=me.delivery, at=NOW)
        worker = replace(me, step=Step.FINISH, pending=outcome)
        label = f"w{index} reads back: still its delivery"
        yield label, _remember(_set(state, index, worker), outcome)
    else:
        yield f"w{index} reads back: moved on", _set(state, index, replace(me, step=Step.LOAD))


_STEPS: dict[Step, Callable[[State, int, Worker], Moves]] = {
    Step.IDLE: _on_idle,
    Step.LOAD: _on_load,
    Step.CLAIM: _on_claim,
    Step.CLAIM_DELIVERY: _on_claim,
    Step.RUN: _on_run,
    Step.COMPLETE: _on_finish,
    Step.FINISH: _on_finish,
    Step.RECHECK: _on_recheck,
    Step.SEND: _on_send,
    Step.RECHECK_DELIVERY: _on_recheck_delivery,
}


def _worker_moves(state: State, index: int) -> Moves:
    """Every way worker ``index``'s next step can go."""
    me = state.workers[index]
    return _STEPS[me.step](state, index, me)


def _claim_is_live(state: State, stored: tec.Checkpoint) -> bool:
    executing = (Step.RUN, Step.COMPLETE, Step.RECHECK)
    delivering = (Step.SEND, Step.FINISH, Step.RECHECK_DELIVERY)
    for worker in state.workers:
        attempt = stored.execution.attempt_id if stored.execution is not None else None
        delivery = stored.delivery.delivery_id if stored.delivery is not None else None
        if worker.attempt == attempt and attempt is not None and worker.step in executing:
            return True
        if worker.delivery == delivery and delivery is not None and worker.step in delivering:
            return True
    return False


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
    if action not in (Action.RECONCILE_EXECUTION, Action.RECONCILE_DELIVERY) or _claim_is_live(
        state, stored
    ):
        return
    if stored.delivery is not None:
        owner = stored.delivery.delivery_id
        sent = any(w.delivery == owner and w.sent for w in state.workers) or _delivered_by(
            state, owner
        )
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


def _delivered_by(state: State, delivery_id: str) -> bool:
    del state, delivery_id
    return False  # a dead worker's send is unknown: the operator releases, never assumes


def successors(state: State) -> Iterator[tuple[str, State]]:
    """Every move from ``state``, labelled for a trace."""
    for index, worker in enumerate(state.workers):
        if worker.step is not Step.DONE:
            yield from _worker_moves(state, index)
        if worker.step not in (Step.IDLE, Step.DONE):
            yield f"w{index} crashes and restarts", _set(state, index, Worker(ids=worker.ids))
    for transition in sorted(state.history, key=lambda t: (t.expected_revision, t.next.to_json())):
        after, landed = _write(state, transition, Write.LANDS)
        if landed:
            yield (
                f"a stale worker replays {transition.next.status.value}@{transition.next.revision}",
                after,
            )
    yield from _operator_moves(state)


def _fenced_refuse_intruders(stored: tec.Checkpoint) -> None:
    for rule in TABLE.transitions.values():
        if stored.status not in rule.sources or rule.fence is Fence.NONE:
            continue
        function: Callable[..., tec.Transition] = getattr(tec, rule.name)
        arguments: dict[str, object] = {"at": NOW}
        arguments["attempt_id" if rule.fence is Fence.ATTEMPT_ID else "delivery_id"] = "intruder"
        if rule.name == "complete_execution":
            arguments["result"] = 0
        if rule.name == "mark_execution_uncertain":
            arguments["reason"] = "intruder"
        try:
            function(stored, **arguments)
        except tec.CheckpointError as error:
            if error.code is not tec.ErrorCode.FENCE_CONFLICT:
                raise Violation(f"{rule.name} refused an intruder with {error.code}") from None
        else:
            raise Violation(f"{rule.name} let a foreign id finish the claim")


def check(state: State) -> None:
    """Raise Violation if ``state`` breaks an invariant."""
    if len(state.executions) > 1:
        raise Violation(f"the tool ran {len(state.executions)} times")
    produced = state.executions[0][1] if state.executions else state.reconciled
    for delivered in state.deliveries:
        if delivered != produced:
            raise Violation("a delivery carried another payload than the one produced")
    stored = state.stored
    if stored is None:
        return
    if tec.Checkpoint.from_dict(stored.to_dict()) != stored or not tec.validate_checkpoint(stored):
        raise Violation("the stored record does not survive its persisted form")
    if state.claimed and tec.decide_checkpoint(stored, BINDING).action is Action.EXECUTE:
        raise Violation("decide says execute for a record that was claimed")
    if (
        stored.result is not None
        and stored.result.pruned_at is None
        and stored.result.payload_json != produced
    ):
        raise Violation("the stored payload is not the one the execution produced")
    _fenced_refuse_intruders(stored)


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


def explore(workers: int, depth: int) -> Report:
    """Breadth-first search of every state within ``depth`` moves of the start."""
    start = State(stored=None, workers=tuple(Worker() for _ in range(workers)))
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
            for label, following in successors(state):
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
    args = parser.parse_args(argv)
    report = explore(args.workers, args.depth)
    print(
        f"workers={report.workers} depth={report.depth} states={report.states}"
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
