"""A call's options as one frozen value, checked once: :class:`CallPolicy`."""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from typing import Any, Final, TypedDict

from ..errors import CheckpointError, ErrorCode
from ..table import TABLE
from ..validation import JSONValue, check_max_payload_bytes
from .vocabulary import (
    DEFAULT_NOT_RUN,
    DEFAULT_NOT_SENT,
    AsyncReconcileHook,
    DeliveryNotSent,
    ToolDidNotRun,
    default_error_payload,
)

__all__ = [
    "LOGGER",
    "MAX_SECONDS",
    "WRITE_BUDGET",
    "CallPolicy",
    "PolicyOptions",
    "call_policy",
]

LOGGER = logging.getLogger("tool_execution_checkpoint")

WRITE_BUDGET = 30.0
"""The default write budget, in seconds: how long a write over a claim the call holds (the
result, an uncertain mark, a release, the delivered mark) keeps being read back and resent
after its first failure."""

MAX_SECONDS = 1e6
"""The longest wait, poll or write budget a call accepts, in seconds."""


def _with(
    kind: type[BaseException], declared: tuple[type[BaseException], ...]
) -> tuple[type[BaseException], ...]:
    """``declared`` with ``kind`` first, unless it holds it already."""
    return declared if kind in declared else (kind, *declared)


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _new_id() -> str:
    """A fresh call token: 128 random bits as 32 hex digits."""
    return secrets.token_hex(16)


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class CallPolicy:
    """A call's options, checked once: what :func:`run_once`, :func:`run_once_async` and
    the guard hand to the machine (:class:`HostProtocol`). Build one and share it between
    calls; each keyword of :func:`run_once` is a field here.

    Attributes:
        on_tool_error: The payload stored and delivered when the tool raises a handler
            error (default: :func:`default_error_payload`, the exception's type only).
        not_sent: The exceptions from ``deliver`` that mean the send did not happen: the
            delivery claim is released for a later resend. :class:`DeliveryNotSent`
            always counts, whatever is declared (see ``known_not_sent``).
        pass_through: The tool's exceptions that are the framework's control flow: the
            execution is marked uncertain with reason ``passed through: <type>`` and the
            exception is re-raised.
        not_run: The tool's exceptions that mean it stopped before any effect (checked
            before ``pass_through``): the claim is released (``released``, reason ``not
            run: <type>``) and the exception re-raised; the next call runs the tool.
            Declare only exceptions raised before the tool may have acted.
            :class:`ToolDidNotRun` always counts, whatever is declared (see
            ``stopped_before_effect``).
        wait_seconds: How long a call that finds another attempt executing waits for it
            to finish, reading every ``poll_seconds`` (0: it answers at once).
        poll_seconds: See ``wait_seconds``.
        write_budget: Seconds, from its first failure, that a write over a claim the call
            holds (the result, an uncertain mark, a release, the delivered mark) keeps
            being read back and resent, with a pause before each read-back after the
            first (:func:`pause_before`); 0: read back :data:`RETRIES` times at once.
            Once it is spent on the result, the record is left executing, the outcome is
            needs-execution-reconciliation with the result in
            :attr:`RunOutcome.unstored`, and one ERROR line names the store key.
        reconcile: Asked, once per call, about an execution claim the call finds held by
            another attempt (executing or uncertain, left by this host or another), with
            a :class:`StuckCall`. It looks the effect up outside (by ``idempotency_key``)
            and answers :class:`Found` (its payload is stored for the claim's attempt and
            delivered: reason ``reconciled: found``), :class:`NotThere` (the host's
            declared payload for a call that did not happen, stored and delivered the
            same way: the tool never runs again), or None: cannot tell
            (needs-execution-reconciliation, left for operators; so is an exception from
            it, and a payload that cannot be stored). Only a hook that knows the claim's
            worker is gone may answer: a live worker's result is then not the stored one
            (its outcome says overtaken). It may be async for :func:`run_once_async`
            only. None (the default): no hook, and such a call answers
            needs-execution-reconciliation.
        clock: Now, as an RFC 3339 string.
        monotonic: The clock the write budget is measured on.
        new_id: A fresh random token per call; its claim ids are ``token.N``.
        max_payload_bytes: The payload limit for every record of the call.
        logger: Gets the phase, the store key, status and revision, never a payload or
            the call id.
        stopped_before_effect: :class:`ToolDidNotRun` and ``not_run``: the exceptions
            that release the claim. ToolDidNotRun says by its type that the tool did not
            run, and the drivers answer it for a claim that landed before a cancellation,
            so no declaration can leave it out: derived, not given.
        known_not_sent: :class:`DeliveryNotSent` and ``not_sent``: the exceptions that
            release a delivery claim. DeliveryNotSent says by its type that nothing was
            sent, and the drivers answer it for a delivery claim held at a cancellation:
            derived, not given.
        polls: How many times a call waits for another attempt (``wait_seconds`` over
            ``poll_seconds``, rounded up): derived, not given.

    Raises:
        CheckpointError: INVALID_ARGUMENT, on the option's field, for an exception list
            that is not a tuple of exception types, a number of seconds that is not from
            0 to 1e6, a ``poll_seconds`` of 0 with a ``wait_seconds``, a hook, clock or
            ``new_id`` that is not callable, a logger without ``isEnabledFor``, ``debug``
            and ``error``, or a ``max_payload_bytes`` that is not an int from 1 to the
            ceiling.
    """

    on_tool_error: Callable[[Exception], JSONValue] = default_error_payload
    not_sent: tuple[type[BaseException], ...] = DEFAULT_NOT_SENT
    pass_through: tuple[type[BaseException], ...] = ()
    not_run: tuple[type[BaseException], ...] = DEFAULT_NOT_RUN
    wait_seconds: float = 0.0
    poll_seconds: float = 0.1
    write_budget: float = WRITE_BUDGET
    reconcile: AsyncReconcileHook | None = None
    clock: Callable[[], str] = _now
    monotonic: Callable[[], float] = time.monotonic
    new_id: Callable[[], str] = _new_id
    max_payload_bytes: int = TABLE.limits.default_max_payload_bytes
    logger: logging.Logger = LOGGER
    stopped_before_effect: tuple[type[BaseException], ...] = field(init=False, compare=False)
    known_not_sent: tuple[type[BaseException], ...] = field(init=False, compare=False)
    polls: int = field(init=False, compare=False)

    def __post_init__(self) -> None:
        for name in _EXCEPTION_OPTIONS:
            given = getattr(self, name)
            kept = tuple(given) if isinstance(given, tuple | list) else None
            if kept is None or not all(
                isinstance(kind, type) and issubclass(kind, BaseException) for kind in kept
            ):
                raise CheckpointError(
                    ErrorCode.INVALID_ARGUMENT, "must be a tuple of exception types", field=name
                )
            object.__setattr__(self, name, kept)
        for name in _SECONDS_OPTIONS:
            seconds = getattr(self, name)
            if (
                isinstance(seconds, bool)
                or not isinstance(seconds, int | float)
                or not 0 <= seconds <= MAX_SECONDS
            ):
                raise CheckpointError(
                    ErrorCode.INVALID_ARGUMENT,
                    "must be a number of seconds from 0 to 1e6",
                    field=name,
                )
            object.__setattr__(self, name, float(seconds))
        if self.wait_seconds and not self.poll_seconds:
            raise CheckpointError(
                ErrorCode.INVALID_ARGUMENT, "must be > 0 when wait_seconds is", field="poll_seconds"
            )
        wait, poll = self.wait_seconds, self.poll_seconds
        object.__setattr__(self, "stopped_before_effect", _with(ToolDidNotRun, self.not_run))
        object.__setattr__(self, "known_not_sent", _with(DeliveryNotSent, self.not_sent))
        object.__setattr__(self, "polls", int(-(-wait // poll)) if wait else 0)
        for name in _CALLABLE_OPTIONS:
            hook = getattr(self, name)
            if not callable(hook) and (name != "reconcile" or hook is not None):
                raise CheckpointError(ErrorCode.INVALID_ARGUMENT, "must be callable", field=name)
        if not all(callable(getattr(self.logger, name, None)) for name in _LOGGER_METHODS):
            raise CheckpointError(
                ErrorCode.INVALID_ARGUMENT,
                "must have isEnabledFor, debug and error",
                field="logger",
            )
        check_max_payload_bytes(self.max_payload_bytes)

    def __repr__(self) -> str:
        """The options' numbers and exception types; a hook, a clock or a logger shows only
        whether it is the default (its own repr may hold what it was built with)."""
        shown = []
        for spec in fields(self):
            value = getattr(self, spec.name)
            if not spec.init:
                continue
            if isinstance(value, tuple):
                names = [kind.__name__ for kind in value]
                text = f"({', '.join(names)}{',' if len(names) == 1 else ''})"
            elif value is None or type(value) in (int, float):
                text = repr(value)
            else:
                text = "<default>" if value is spec.default else "<given>"
            shown.append(f"{spec.name}={text}")
        return f"CallPolicy({', '.join(shown)})"


class PolicyOptions(TypedDict, total=False):
    """The fields of :class:`CallPolicy`, as keywords of :func:`run_once`,
    :func:`run_once_async` and :class:`HostProtocol`."""

    on_tool_error: Callable[[Exception], JSONValue]
    not_sent: tuple[type[BaseException], ...]
    pass_through: tuple[type[BaseException], ...]
    not_run: tuple[type[BaseException], ...]
    wait_seconds: float
    poll_seconds: float
    write_budget: float
    reconcile: AsyncReconcileHook | None
    clock: Callable[[], str]
    monotonic: Callable[[], float]
    new_id: Callable[[], str]
    max_payload_bytes: int
    logger: logging.Logger


_EXCEPTION_OPTIONS: Final = ("not_sent", "pass_through", "not_run")
_SECONDS_OPTIONS: Final = ("wait_seconds", "poll_seconds", "write_budget")
_CALLABLE_OPTIONS: Final = ("on_tool_error", "reconcile", "clock", "monotonic", "new_id")
_LOGGER_METHODS: Final = ("isEnabledFor", "debug", "error")
_OPTION_NAMES: Final = frozenset(spec.name for spec in fields(CallPolicy) if spec.init)


def call_policy(policy: CallPolicy | None, options: Mapping[str, Any]) -> CallPolicy:
    """The policy of a call given ``policy`` or option keywords: ``policy`` itself, or a
    new one built from ``options``. A keyword given with a policy must hold the policy's
    own value.

    Raises:
        CheckpointError: INVALID_ARGUMENT on the field ``policy`` for a policy that is not
            a :class:`CallPolicy`; on the keyword's field for a keyword whose value differs
            from the policy's ("conflicts with the policy given"); any of
            :class:`CallPolicy`'s.
        TypeError: for a keyword that is not an option.
    """
    if not options and policy is None:
        return _DEFAULTS  # what CallPolicy() builds: every default, checked once
    unknown = sorted(options.keys() - _OPTION_NAMES)
    if unknown:
        raise TypeError(f"{unknown[0]!r} is not a call option")
    if policy is None:
        return CallPolicy(**options)
    if not isinstance(policy, CallPolicy):
        raise CheckpointError(ErrorCode.INVALID_ARGUMENT, "must be a CallPolicy", field="policy")
    if options:
        given = replace(policy, **options)
        for name in options:
            if getattr(given, name) != getattr(policy, name):
                raise CheckpointError(
                    ErrorCode.INVALID_ARGUMENT,
                    "conflicts with the policy given: set it in the policy",
                    field=name,
                )
    return policy


_DEFAULTS: Final = CallPolicy()
"""The policy of a call given no policy and no option: a CallPolicy is immutable, so one
built with every default serves every such call."""
