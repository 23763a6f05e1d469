"""Which call is which: the one identity model of every guarded call.

A call's identity has three parts:

- a **scope** that survives the failure being guarded against: a call id the application
  or the framework keeps (:func:`tool_call`, a framework's tool call id scoped by its
  conversation), or a scope the application names (:func:`call_scope`: a conversation's
  turn, kept on every retry of the turn);
- the **intent** within it (:class:`Intent`): the tool, its revision and the fingerprint
  of the arguments that identify the effect (all of them unless the application names
  them);
- within a named scope, the **occurrence**: the n-th call of the same intent there. A
  retry or a reorder of the scope's calls makes the same intents in some order, and
  calls of one intent are alike, so each gets the number it had. A call that was refused
  (nothing to hand back, another binding, nothing run) gives its number back: the model's
  retry of it is the same call again, never a new one that runs the tool.

The innermost declaration wins (an enclosing :func:`tool_call` or :func:`call_scope`),
then the framework's own id; an id the caller owns (an MCP client's key) is authoritative
and wins over both. With none the call is refused before anything runs. A guarded tool
called by another guarded tool is numbered within the calling call.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from .errors import CheckpointError, ErrorCode

__all__ = [
    "CallScope",
    "Intent",
    "call_scope",
    "current_call_id",
    "current_idempotency_key",
    "idempotency_key_of",
    "tool_call",
]


@dataclasses.dataclass(frozen=True, slots=True)
class Intent:
    """What one call asks for: the same intent twice is the same effect asked twice.

    Attributes:
        tool_name: The binding's tool name.
        revision: The binding's tool revision.
        fingerprint: The fingerprint of the arguments that identify the effect.
    """

    tool_name: str
    revision: str
    fingerprint: str

    def digest(self) -> str:
        """32 hex digits that tell intents apart within a scope."""
        text = f"{len(self.tool_name)}:{self.tool_name}{len(self.revision)}:{self.revision}"
        return hashlib.sha256(f"{text}{self.fingerprint}".encode()).hexdigest()[:32]


class CallScope:
    """A scope the application names, whose calls are numbered per intent.

    Attributes:
        name: The scope's name, the same on every retry of what it covers.
        refused: The first refusal of a call made in the scope, or None.
    """

    __slots__ = ("_lock", "_taken", "name", "refused")

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise CheckpointError(
                ErrorCode.INVALID_ARGUMENT, "is not a non-empty string", field="scope"
            )
        self.name = name
        self.refused: BaseException | None = None
        self._taken: dict[str, set[int]] = {}
        self._lock = threading.Lock()

    def take(self, intent: Intent) -> tuple[str, int]:
        """The lowest occurrence of ``intent`` not held by another call of the scope,
        now held, and the call id it names: ``<scope>/<tool>/<intent digest>/<n>``."""
        digest = intent.digest()
        with self._lock:
            held = self._taken.setdefault(digest, set())
            number = 1
            while number in held:
                number += 1
            held.add(number)
        return f"{self.name}/{intent.tool_name}/{digest}/{number}", number

    def give_back(self, intent: Intent, number: int, refusal: BaseException | None) -> None:
        """Free a refused call's occurrence, so that a retry of it is the same call."""
        with self._lock:
            self._taken.get(intent.digest(), set()).discard(number)
            if refusal is not None and self.refused is None:
                self.refused = refusal


_DECLARED: ContextVar[str | CallScope | None] = ContextVar(
    "tool_execution_checkpoint.declared", default=None
)
"""The innermost declaration: a :func:`tool_call` id or a :func:`call_scope`."""

_RUNNING_KEY: ContextVar[str | None] = ContextVar(
    "tool_execution_checkpoint.idempotency_key", default=None
)


@contextmanager
def tool_call(call_id: str) -> Iterator[None]:
    """Make ``call_id`` the call id of every guarded tool called inside the block (in
    this thread or task and what it starts): one call, whose id survives the framework's
    retry or resume, such as the model's tool-use id."""
    token = _DECLARED.set(call_id)
    try:
        yield
    finally:
        _DECLARED.reset(token)


@contextmanager
def call_scope(name: str) -> Iterator[CallScope]:
    """Name the scope of the guarded calls made inside the block: the same ``name`` on
    every retry of what the block does (``"conv-42/turn-7"`` for a conversation's turn).
    Each call's id is the scope, its intent and its occurrence (see the module
    docstring); a framework's own id is not used inside the block.

    Raises:
        CheckpointError: INVALID_ARGUMENT for an empty name. On leaving the block without
            an exception of its own, the first refusal of a call made inside it (a
            :class:`~tool_execution_checkpoint.CallNotAnswered` or a ``CheckpointError``),
            so a framework that turned it into a tool error for the model still fails the
            turn for the host.
    """
    scope = CallScope(name)
    token = _DECLARED.set(scope)
    try:
        yield scope
    finally:
        _DECLARED.reset(token)
    if scope.refused is not None:
        raise scope.refused


def current_call_id() -> str | None:
    """The call id set by the innermost declaration when it is a :func:`tool_call`
    block, or None."""
    declared = _DECLARED.get()
    return declared if isinstance(declared, str) else None


def current_scope() -> CallScope | None:
    """The innermost declaration when it is a :func:`call_scope`, or None."""
    declared = _DECLARED.get()
    return declared if isinstance(declared, CallScope) else None


@dataclasses.dataclass(slots=True)
class Claim:
    """A call's id and, in a named scope, the occurrence it holds."""

    call_id: str
    scope: CallScope | None = None
    occurrence: int = 0

    def release(self, intent: Intent, refusal: BaseException | None) -> None:
        """Give the occurrence back (a call that was not answered)."""
        if self.scope is not None:
            self.scope.give_back(intent, self.occurrence, refusal)


def claim_identity(
    intent: Intent, framework_id: str | None, *, authoritative: bool = False
) -> Claim:
    """The call id of a call of ``intent``: ``framework_id`` when it is ``authoritative``
    (an id the caller owns, such as an MCP client's key, that no declaration in the serving
    process may override); else the innermost declaration (a :func:`tool_call` id, or an
    occurrence in a :func:`call_scope`); else ``framework_id``.

    Raises:
        CheckpointError: INVALID_ARGUMENT when there is none of them.
    """
    declared = None if authoritative else _DECLARED.get()
    if isinstance(declared, str):
        return Claim(declared)
    if declared is not None:
        call_id, number = declared.take(intent)
        return Claim(call_id, declared, number)
    if framework_id is not None:
        return Claim(framework_id)
    raise CheckpointError(
        ErrorCode.INVALID_ARGUMENT,
        "is missing: call the tool inside `with call_scope(name):` or "
        "`with tool_call(call_id):`, or in a framework run whose adapter names the call",
        field="call_id",
    )


def idempotency_key_of(namespace: str, call_id: str) -> str:
    """The downstream idempotency key of the call stored under ``namespace`` and
    ``call_id``: ``"tec-"`` and 48 hex digits of a SHA-256, so it shows neither."""
    text = f"{len(namespace)}:{namespace}{call_id}"
    return f"tec-{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:48]}"


@contextmanager
def running_call(namespace: str, call_id: str) -> Iterator[None]:
    """While a call's tool runs: its downstream idempotency key is current, and the call
    is the scope of the guarded calls the tool makes itself (numbered per intent, like a
    :func:`call_scope` named after the call), so that they never take the call's own id
    or an enclosing scope's numbers."""
    key_token = _RUNNING_KEY.set(idempotency_key_of(namespace, call_id))
    scope_token = _DECLARED.set(CallScope(f"{call_id}/inner"))
    try:
        yield
    finally:
        _DECLARED.reset(scope_token)
        _RUNNING_KEY.reset(key_token)


def current_idempotency_key() -> str:
    """Inside a guarded tool, a key for the external API it calls (Stripe's
    ``Idempotency-Key``, an e-mail provider's message key): the same on every retry and
    resume of this call, different for every other call, and showing none of the call's
    identifiers. Pass it with the effect, so that the effect can be looked up by it
    later (when an operator reconciles an uncertain call, say).

    Raises:
        CheckpointError: INVALID_ARGUMENT outside a guarded tool's run.
    """
    key = _RUNNING_KEY.get()
    if key is None:
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT,
            "is only known while a guarded tool runs",
            field="idempotency key",
        )
    return key
