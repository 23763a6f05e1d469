"""Real concurrency: many threads run the whole host protocol against one store."""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from ..records import Binding, Checkpoint
from ..store import CheckpointStore, StoreError, checkpoint_key
from ..table import Action, Status
from ..transitions import (
    claim_delivery,
    claim_execution,
    complete_delivery,
    complete_execution,
    create_checkpoint,
    decide_checkpoint,
)

__all__ = ["StressReport", "threaded_stress"]

NOW = "2026-01-01T00:00:00Z"


@dataclass(frozen=True)
class StressReport:
    """What a threaded stress run saw."""

    executions: Counter[str]
    """How often each call id's tool ran (must be at most once each)."""
    deliveries: Counter[str]
    """How often each call id's result was delivered."""
    lost_claims: int
    """Claims that lost their compare-and-swap (contention actually happened)."""


def _host(
    store: CheckpointStore,
    binding: Binding,
    me: str,
    ran: Callable[[str], None],
    delivered: Callable[[str], None],
) -> bool:
    """Run the protocol once for ``binding``; return False if a claim was lost."""
    key = checkpoint_key(binding)
    store.create_if_absent(key, create_checkpoint(binding, created_at=NOW))
    raw = store.get(key)
    assert raw is not None, "a created record is missing"
    decision = decide_checkpoint(raw, binding)
    record: Checkpoint = decision.checkpoint
    if decision.action is Action.EXECUTE:
        claim = claim_execution(record, attempt_id=me, at=NOW)
        if not store.compare_and_swap(key, claim.expected_revision, claim.next):
            return False
        ran(binding.call_id)
        done = complete_execution(claim.next, attempt_id=me, at=NOW, result={"by": me})
        if not store.compare_and_swap(key, done.expected_revision, done.next):
            raise AssertionError("the owning attempt lost its completion")
        record = done.next
    if record.status is Status.COMPLETED:
        delivery = claim_delivery(record, delivery_id=me, at=NOW)
        if not store.compare_and_swap(key, delivery.expected_revision, delivery.next):
            return False
        delivered(binding.call_id)
        finish = complete_delivery(delivery.next, delivery_id=me, at=NOW)
        if not store.compare_and_swap(key, finish.expected_revision, finish.next):
            raise AssertionError("the owning delivery lost its completion")
    return True


def threaded_stress(
    store: CheckpointStore, *, threads: int = 8, keys: int = 64, seed: int = 0
) -> StressReport:
    """Start ``threads`` threads at once; each runs the protocol for every one of
    ``keys`` checkpoints in its own random order. Returns what happened; the caller
    asserts that every tool ran exactly once and every result was delivered once."""
    bindings = [
        Binding("stress", f"call-{index}", "tool", "1", "sha256:0") for index in range(keys)
    ]
    executions: Counter[str] = Counter()
    deliveries: Counter[str] = Counter()
    lost = 0
    lock = threading.Lock()
    start = threading.Barrier(threads)
    errors: list[BaseException] = []

    def count(counter: Counter[str]) -> Callable[[str], None]:
        def add(call_id: str) -> None:
            with lock:
                counter[call_id] += 1

        return add

    def work(number: int) -> None:
        nonlocal lost
        order = bindings[:]
        random.Random(seed * 1_000 + number).shuffle(order)
        start.wait()
        try:
            for binding in order:
                if not _host(store, binding, f"t{number}", count(executions), count(deliveries)):
                    with lock:
                        lost += 1
        except (AssertionError, StoreError) as error:
            errors.append(error)

    pool = [threading.Thread(target=work, args=(number,)) for number in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    if errors:
        raise errors[0]
    return StressReport(executions, deliveries, lost)
