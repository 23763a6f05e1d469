"""Real concurrency: many threads run the whole host protocol against one store."""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from ..records import Binding
from ..runner import RunStatus, run_once
from ..stores.core import CheckpointStore, StoreError, checkpoint_key
from ..transitions import create_checkpoint

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
    """Run the protocol once for ``binding`` through :func:`run_once`; return False if
    another thread held or won a claim. An owner that could not record its own result or
    delivery is a broken store, not contention: that raises."""
    sent: list[object] = []

    def tool() -> dict[str, str]:
        ran(binding.call_id)
        return {"by": me}

    def deliver(payload: object) -> None:
        sent.append(payload)
        delivered(binding.call_id)

    outcome = run_once(store, binding, tool, deliver, clock=lambda: NOW, new_id=lambda: me)
    if outcome.ran_tool and outcome.status is RunStatus.NEEDS_EXECUTION_RECONCILIATION:
        raise AssertionError("the owning attempt lost its completion")
    if sent and outcome.status not in _DELIVERED:
        raise AssertionError("the owning delivery lost its completion")
    return outcome.status not in _CONTENDED


_DELIVERED = frozenset({RunStatus.EXECUTED_AND_DELIVERED, RunStatus.DELIVERED_STORED_RESULT})
_CONTENDED = frozenset(
    {
        RunStatus.LOST_TO_ANOTHER_WORKER,
        RunStatus.NEEDS_EXECUTION_RECONCILIATION,
        RunStatus.NEEDS_DELIVERY_RECONCILIATION,
    }
)


def threaded_stress(
    store: CheckpointStore, *, threads: int = 8, keys: int = 64, seed: int = 0
) -> StressReport:
    """Start ``threads`` threads at once; each runs the protocol for every one of
    ``keys`` checkpoints in its own random order. Every other key starts stored as a
    ready record, so that its claims race through compare-and-swap; the others start
    absent, so that theirs race through create-if-absent of the claimed record. Returns
    what happened; the caller asserts that every tool ran exactly once and every result
    was delivered once."""
    bindings = [
        Binding("stress", f"call-{index}", "tool", "1", "sha256:0") for index in range(keys)
    ]
    for binding in bindings[::2]:
        created = create_checkpoint(binding, created_at=NOW)
        if not store.create_if_absent(checkpoint_key(binding), created):
            raise AssertionError("create_if_absent refused a new key")
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
