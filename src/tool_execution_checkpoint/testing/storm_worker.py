"""The kill storm's worker process (see :func:`.processes.kill_storm`): it builds its
store from a ``"module:callable"`` factory, races the other workers for each round's
claim when the parent says so, then serves calls until it is killed. The tool's external
effect is one line appended to a shared log (``run <call id> <attempt> <payload>``),
written only after the claim's CAS won; a completion acknowledged by the store is logged
as ``completed <call id> <attempt>``."""

from __future__ import annotations

import importlib
import json
import os
import random
import sys
from collections.abc import Callable
from typing import Any, BinaryIO

from .. import transitions
from ..records import Binding, Checkpoint
from ..stores.core import CheckpointStore, StoreError, checkpoint_key
from ..stores.opening import open_store
from ..table import Action, Status
from ..transitions import Transition

__all__ = ["call_binding", "load_factory", "round_binding", "run_worker", "url_store"]

NOW = "2026-01-01T00:00:00Z"


def load_factory(spec: str) -> Callable[[str], CheckpointStore]:
    """Import ``"module:callable"`` (the callable may be dotted, e.g. ``Class.from_url``)."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"a factory is 'module:callable', not {spec!r}")
    target: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise TypeError(f"{spec} is not callable")
    factory: Callable[[str], CheckpointStore] = target
    return factory


def url_store(argument: str) -> CheckpointStore:
    """A factory for a store named by URL: ``argument`` is the JSON text of
    ``{"url": URL, "options": {...}}``, opened with
    :func:`tool_execution_checkpoint.stores.opening.open_store` (``options`` are the store's
    own, such as ``table`` or ``prefix``). ``tool-checkpoint check-store`` storms a URL
    store through it: each worker process opens the URL itself."""
    spec = json.loads(argument)
    store: CheckpointStore = open_store(spec["url"], **spec.get("options", {}))
    return store


def _binding(call_id: str) -> Binding:
    return Binding("storm", call_id, "tool", "1", "sha256:0")


def call_binding(call: int) -> Binding:
    """A call of the free-running phase."""
    return _binding(f"call-{call}")


def round_binding(number: int) -> Binding:
    """The one call every worker races for in round ``number``."""
    return _binding(f"round-{number}")


def _say(line: str) -> None:
    """One line to the parent, unbuffered: it reads them as they come."""
    os.write(1, f"{line}\n".encode())


def _prepare(store: CheckpointStore, binding: Binding, me: str) -> Transition | None:
    """Create the record if absent and read it: the claim to try, if decide says execute."""
    key = checkpoint_key(binding)
    store.create_if_absent(key, transitions.create_checkpoint(binding, created_at=NOW))
    raw = store.get(key)
    if raw is None:
        return None
    decision = transitions.decide_checkpoint(raw, binding)
    if decision.action is not Action.EXECUTE:
        return None
    return transitions.claim_execution(decision.checkpoint, attempt_id=me, at=NOW)


def _ran(log: int, binding: Binding, me: str) -> dict[str, str]:
    """The tool's external effect, logged once the claim's CAS won; its payload."""
    payload = {"by": me}
    os.write(log, f"run {binding.call_id} {me} {json.dumps(payload)}\n".encode())
    return payload


def _after_the_claim(
    store: CheckpointStore,
    binding: Binding,
    claimed: Checkpoint,
    payload: dict[str, str],
    *,
    me: str,
    rng: random.Random,
    log: int,
) -> None:
    """Record the result of a tool that ran, then claim its delivery and finish it (or
    give it up)."""
    key = checkpoint_key(binding)
    done = transitions.complete_execution(claimed, attempt_id=me, at=NOW, result=payload)
    if not store.compare_and_swap(key, done.expected_revision, done.next):
        return
    os.write(log, f"completed {binding.call_id} {me}\n".encode())
    _deliver(store, binding, done.next, me, rng)


def _deliver(
    store: CheckpointStore, binding: Binding, record: Checkpoint, me: str, rng: random.Random
) -> None:
    key = checkpoint_key(binding)
    delivery = transitions.claim_delivery(record, delivery_id=me, at=NOW)
    if not store.compare_and_swap(key, delivery.expected_revision, delivery.next):
        return
    finish = transitions.complete_delivery if rng.random() < 0.7 else transitions.release_delivery
    after = finish(delivery.next, delivery_id=me, at=NOW)
    store.compare_and_swap(key, after.expected_revision, after.next)


def _serve_once(
    store: CheckpointStore, binding: Binding, me: str, rng: random.Random, log: int
) -> None:
    """One pass of the host protocol for one call, as any host would run it."""
    claim = _prepare(store, binding, me)
    if claim is not None:
        key = checkpoint_key(binding)
        if store.compare_and_swap(key, claim.expected_revision, claim.next):
            payload = _ran(log, binding, me)
            _after_the_claim(store, binding, claim.next, payload, me=me, rng=rng, log=log)
        return
    raw = store.get(checkpoint_key(binding))
    if raw is not None:
        record = transitions.decide_checkpoint(raw, binding).checkpoint
        if record.status is Status.COMPLETED:
            _deliver(store, binding, record, me, rng)


def _race(
    store: CheckpointStore,
    number: int,
    *,
    me: str,
    rng: random.Random,
    log: int,
    commands: BinaryIO,
) -> None:
    """One round: prepare the claim of the round's call, say ``armed``, wait for ``go``,
    then try the claim's CAS at the moment every other worker tries it. A won claim is
    said (``won``) after its effect is logged; told to hold, the worker then waits for a
    line that never comes (the parent kills it there, between the claim and the
    result); otherwise it finishes the call. ``done`` ends the round."""
    binding = round_binding(number)
    claim: Transition | None = None
    try:
        claim = _prepare(store, binding, me)
    except StoreError:
        claim = None  # an unknown outcome: this worker sits the race out
    _say(f"armed {number}")
    hold = commands.readline().split()[-1:] == [b"hold"]
    try:
        key = checkpoint_key(binding)
        if claim is not None and store.compare_and_swap(key, claim.expected_revision, claim.next):
            payload = _ran(log, binding, me)
            _say(f"won {number}")
            if hold:
                commands.readline()
            _after_the_claim(store, binding, claim.next, payload, me=me, rng=rng, log=log)
    except StoreError:
        pass
    _say(f"done {number}")


_PASSED = frozenset(
    status.value
    for status in (Status.EXECUTING, Status.UNCERTAIN, Status.DELIVERING, Status.DELIVERED)
)
"""The statuses in which no worker of the storm can move a call on (delivered, or a claim
that only its owner, alive or killed, may finish): the workers' window passes them."""


def _passed(store: CheckpointStore, call: int) -> bool:
    raw = store.get(checkpoint_key(call_binding(call)))
    return raw is not None and raw.get("status") in _PASSED


def run_worker(
    factory: str, *, keys: int, log_path: str, name: str, seed: int, window: int = 0
) -> None:
    """Read the store's argument (one JSON string) from the first line of standard input
    (never the command line, which other users can see: it may be a URL with a
    password), open the store, say ``ready``, then obey the parent's lines: ``arm N``
    and ``go N [hold]`` run round N (:func:`_race`); ``free`` starts the free-running
    phase, which serves calls until the worker is killed or its parent is gone."""
    parent = os.getppid()
    commands = sys.stdin.buffer
    argument = json.loads(commands.readline())
    store = load_factory(factory)(argument)
    rng = random.Random(seed)
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    _say("ready")  # the parent kills only workers that got this far
    for number in range(sys.maxsize):
        words = commands.readline().split()
        if not words:
            return  # the parent is gone
        if words[0] == b"free":
            break
        me = f"{name}-r{number}"
        _race(store, int(words[1]), me=me, rng=rng, log=log, commands=commands)
    base = 0
    for number in range(sys.maxsize):
        if os.getppid() != parent:
            return  # the storm is over (its parent was killed): nobody reads the effects
        try:
            if window and base < keys:
                # Every worker works on the same few lowest calls it can still move on,
                # so claims race all the time, not only at the start of the storm (a call
                # left claimed by a killed worker would otherwise stall the window).
                while base < keys and _passed(store, base):
                    base += 1
                call = min(keys - 1, base + rng.randrange(window))
            else:
                call = rng.randrange(keys)
            _serve_once(store, call_binding(call), f"{name}-{number}", rng, log)
        except StoreError:
            continue  # an unknown outcome: the next pass reloads and decides
