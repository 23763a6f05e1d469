"""The transition table, loaded at import time from ``spec/transitions.toml``.

The table is the protocol's single source of truth: the core reads its guards, targets,
fences, granted actions, status shapes and limits from :data:`TABLE`, and no copy of it is
written in code. The enums below are the protocol's vocabulary (the names a record may
carry); the loader checks that the table uses exactly that vocabulary and that it keeps the
protocol's safety rules, so an edit that breaks one fails at import, not in production.

Where the table is found: an installed wheel carries a copy inside the package
(``tool_execution_checkpoint/spec/``); a source checkout or an editable install reads the
repository's ``spec/`` directly.
"""

from __future__ import annotations

import enum
import itertools
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

from .errors import ErrorCode

__all__ = [
    "CREATE",
    "NULLABLE_PARTS",
    "RECORD_FIELDS",
    "TABLE",
    "Action",
    "ComposedRule",
    "ErrorRule",
    "Fence",
    "Limits",
    "SpecError",
    "Status",
    "StatusRule",
    "TransitionRule",
    "TransitionTable",
    "load_table",
    "spec_file",
    "table_from_data",
]


_E = TypeVar("_E", bound=enum.Enum)


class Status(enum.StrEnum):
    """The status of a checkpoint record."""

    READY = "ready"
    RELEASED = "released"
    EXECUTING = "executing"
    UNCERTAIN = "uncertain"
    COMPLETED = "completed"
    DELIVERING = "delivering"
    DELIVERED = "delivered"


class Action(enum.StrEnum):
    """What a host should do: the answer of decide, or what a won compare-and-swap grants."""

    EXECUTE = "execute"
    RECONCILE_EXECUTION = "reconcile-execution"
    DELIVER = "deliver"
    RECONCILE_DELIVERY = "reconcile-delivery"
    HAND_BACK = "hand-back"
    NONE = "none"


class Fence(enum.StrEnum):
    """Which stored claim id a transition's caller must present."""

    NONE = "none"
    ATTEMPT_ID = "attemptId"
    DELIVERY_ID = "deliveryId"


NULLABLE_PARTS: frozenset[str] = frozenset(
    {
        "execution",
        "execution.uncertain",
        "result",
        "result.prunedAt",
        "delivery",
        "delivery.deliveredAt",
    }
)
"""The parts of a record that may be null, in the persisted (camelCase) naming."""

RECORD_FIELDS: frozenset[str] = frozenset(
    {
        "execution.attemptId",
        "execution.claimedAt",
        "execution.uncertain.reason",
        "execution.uncertain.at",
        "result.payload",
        "result.completedAt",
        "result.prunedAt",
        "delivery.deliveryId",
        "delivery.claimedAt",
        "delivery.deliveredAt",
    }
)
"""The fields a transition may set, in the persisted (camelCase) naming."""


class SpecError(RuntimeError):
    """The transition table is malformed or breaks a safety rule. This is a packaging or
    editing mistake in spec/, never a caller's mistake, so it is not a CheckpointError."""


@dataclass(frozen=True, slots=True)
class Limits:
    """The protocol's limits. See docs/spec.md for their exact meaning."""

    default_max_payload_bytes: int
    ceiling_max_payload_bytes: int
    max_depth: int
    max_values: int
    max_identifier_chars: int
    max_reason_chars: int
    max_revision: int


@dataclass(frozen=True, slots=True)
class StatusRule:
    """One row of the status table."""

    status: Status
    action: Action
    terminal: bool
    meaning: str
    required: frozenset[str]
    forbidden: frozenset[str]


@dataclass(frozen=True, slots=True)
class TransitionRule:
    """One row of the transition table. ``sources`` keeps the table's order."""

    name: str
    sources: tuple[Status, ...]
    target: Status
    fence: Fence
    requires_null: frozenset[str]
    sets: tuple[str, ...]
    clears: tuple[str, ...]
    grants: Action
    durable: bool
    meaning: str


CREATE = "create"
"""The name a composed step uses, as its first part, for create_checkpoint's new record."""


@dataclass(frozen=True, slots=True)
class ComposedRule:
    """One composed step: one write doing what its parts do, one after the other.

    ``parts`` are table transitions, after :data:`CREATE` when ``creates``; ``sources``
    is empty when it creates. ``target``, ``fence``, ``grants`` and ``requires_null``
    are derived from the parts (the last part's target, the first part's fence and null
    requirements, and the last part's grant, or ``hand-back`` for a ``hand_back`` step).
    A composed step is always ``durable``."""

    name: str
    creates: bool
    parts: tuple[str, ...]
    sources: tuple[Status, ...]
    target: Status
    fence: Fence
    requires_null: frozenset[str]
    grants: Action
    hand_back: bool
    durable: bool
    meaning: str
    recovery: str


@dataclass(frozen=True, slots=True)
class ErrorRule:
    """What an error code means and what to do about it."""

    code: ErrorCode
    meaning: str
    remedy: str


@dataclass(frozen=True, slots=True)
class TransitionTable:
    """The whole protocol as data, in the order the table declares it."""

    schema_version: int
    initial_status: Status
    initial_revision: int
    initial_revision_why: str
    format_why: str
    hand_back: str
    limits: Limits
    statuses: Mapping[Status, StatusRule]
    transitions: Mapping[str, TransitionRule]
    composed: Mapping[str, ComposedRule]
    timestamp_format: str
    timestamp_ordering: str
    timestamp_ordering_why: str
    guarantees: tuple[str, ...]
    non_guarantees: tuple[str, ...]
    errors: Mapping[ErrorCode, ErrorRule]


def spec_file(name: str) -> Traversable:
    """Return a file of the protocol's spec (``transitions.toml`` or ``record.schema.json``).

    The copy inside an installed wheel wins; otherwise the repository's ``spec/`` is used.
    """
    packaged = resources.files(__package__).joinpath("spec", name)
    if packaged.is_file():
        return packaged
    source = Path(__file__).resolve().parents[2] / "spec" / name
    if source.is_file():
        return source
    raise SpecError(f"spec file {name!r} is neither in the package nor in a source checkout")


def _table(data: Mapping[str, object], key: str) -> Mapping[str, object]:
    value = data.get(key)
    if not isinstance(value, dict):
        raise SpecError(f"[{key}] must be a table")
    return value


def _rows(
    data: Mapping[str, object], section: str, expected: set[str]
) -> Iterator[tuple[str, dict[str, Any], str]]:
    """Each row of the table ``[section]``, which must be a table with exactly the keys
    ``expected``: its name, the row, and where it stands (for messages)."""
    for name, row in _table(data, section).items():
        where = f"{section}.{name}"
        if not isinstance(row, dict):
            raise SpecError(f"[{where}] must be a table")
        _keys(row, where, expected)
        yield name, row, where


def _keys(data: Mapping[str, object], where: str, expected: set[str]) -> None:
    if set(data) != expected:
        raise SpecError(f"{where} must have exactly the keys {sorted(expected)}")


def _str(data: Mapping[str, object], key: str, where: str) -> str:
    value = data[key]
    if not isinstance(value, str) or not value:
        raise SpecError(f"{where}.{key} must be a non-empty string")
    return value


def _int(data: Mapping[str, object], key: str, where: str) -> int:
    value = data[key]
    if type(value) is not int or value < 0:
        raise SpecError(f"{where}.{key} must be a non-negative integer")
    return value


def _strs(data: Mapping[str, object], key: str, where: str) -> tuple[str, ...]:
    value = data[key]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise SpecError(f"{where}.{key} must be a list of strings")
    if len(set(value)) != len(value):
        raise SpecError(f"{where}.{key} lists an item twice")
    return tuple(value)


def _enum(kind: type[_E], value: str, where: str) -> _E:
    try:
        return kind(value)
    except ValueError:
        raise SpecError(f"{where}: {value!r} is not a valid {kind.__name__}") from None


def _load_statuses(data: Mapping[str, object]) -> dict[Status, StatusRule]:
    statuses: dict[Status, StatusRule] = {}
    for name, row, where in _rows(
        data, "statuses", {"action", "terminal", "meaning", "required", "forbidden"}
    ):
        required = frozenset(_strs(row, "required", where))
        forbidden = frozenset(_strs(row, "forbidden", where))
        if not (required | forbidden) <= NULLABLE_PARTS or required & forbidden:
            raise SpecError(f"{where}: required and forbidden must be disjoint nullable parts")
        if not isinstance(row["terminal"], bool):
            raise SpecError(f"{where}.terminal must be a boolean")
        status = _enum(Status, name, where)
        statuses[status] = StatusRule(
            status=status,
            action=_enum(Action, _str(row, "action", where), where),
            terminal=row["terminal"],
            meaning=_str(row, "meaning", where),
            required=required,
            forbidden=forbidden,
        )
    if set(statuses) != set(Status):
        raise SpecError("[statuses] must list every Status exactly once")
    return statuses


def _load_transitions(data: Mapping[str, object]) -> dict[str, TransitionRule]:
    transitions: dict[str, TransitionRule] = {}
    for name, row, where in _rows(
        data,
        "transitions",
        {
            "from",
            "to",
            "fence",
            "requires_null",
            "sets",
            "clears",
            "grants",
            "durable",
            "meaning",
        },
    ):
        if not isinstance(row["durable"], bool):
            raise SpecError(f"{where}.durable must be a boolean")
        sources = tuple(_enum(Status, item, where) for item in _strs(row, "from", where))
        sets = _strs(row, "sets", where)
        clears = _strs(row, "clears", where)
        requires_null = frozenset(_strs(row, "requires_null", where))
        if (
            not set(sets) <= RECORD_FIELDS
            or not set(clears) | requires_null <= NULLABLE_PARTS
            or not sources
        ):
            raise SpecError(f"{where}: unknown field or part, or no from-status")
        transitions[name] = TransitionRule(
            name=name,
            sources=sources,
            target=_enum(Status, _str(row, "to", where), where),
            fence=_enum(Fence, _str(row, "fence", where), where),
            requires_null=requires_null,
            sets=sets,
            clears=clears,
            grants=_enum(Action, _str(row, "grants", where), where),
            durable=row["durable"],
            meaning=_str(row, "meaning", where),
        )
    return transitions


def _load_composed(data: Mapping[str, object], table: TransitionTable) -> dict[str, ComposedRule]:
    """The composed steps, derived from their parts (of ``table``), which must chain."""
    transitions, initial = table.transitions, table.initial_status
    terminal = {rule.status for rule in table.statuses.values() if rule.terminal}
    composed: dict[str, ComposedRule] = {}
    keys = {"composes", "from", "hand_back", "meaning", "recovery"}
    for name, row, where in _rows(data, "composed", keys):
        names = _strs(row, "composes", where)
        creates = bool(names) and names[0] == CREATE
        parts = names[1:] if creates else names
        if name in transitions or len(names) < 2 or not all(p in transitions for p in parts):
            raise SpecError(f"{where}: composes two or more parts of the table, create first")
        if not isinstance(row["hand_back"], bool):
            raise SpecError(f"{where}.hand_back must be a boolean")
        rules = [transitions[part] for part in parts]
        sources = tuple(_enum(Status, item, where) for item in _strs(row, "from", where))
        if creates != (not sources) or not set(sources) <= set(rules[0].sources):
            raise SpecError(f"{where}: from is empty exactly when it creates, else the first's")
        if creates and initial not in rules[0].sources:
            raise SpecError(f"{where}: its first part does not leave the initial status")
        for before, after in itertools.pairwise(rules):
            if before.target not in after.sources:
                raise SpecError(f"{where}: {before.name} does not land where {after.name} leaves")
        granted = _granting_part(rules, row["hand_back"], where)
        if row["hand_back"] and rules[-1].target not in terminal:
            raise SpecError(f"{where}: a hand-back step lands in a terminal status")
        composed[name] = ComposedRule(
            name=name,
            creates=creates,
            parts=parts,
            sources=sources,
            target=rules[-1].target,
            fence=rules[0].fence,  # unfenced when it creates: nothing fences leaving ready
            requires_null=rules[0].requires_null,
            grants=Action.HAND_BACK if row["hand_back"] else rules[granted].grants,
            hand_back=row["hand_back"],
            durable=True,  # every part up to its grant is, so the step stores durably
            meaning=_str(row, "meaning", where),
            recovery=_str(row, "recovery", where),
        )
    return composed


def _granting_part(rules: list[TransitionRule], hand_back: bool, where: str) -> int:
    """The index of the part whose grant the step carries, once its parts are checked:
    only the first part is fenced and only the last grants; a hand-back step's parts go
    on after a part that grants deliver, recording the hand-back: fenced only by the
    claim that part made, they may be non-durable (and the caller checks that they land
    in a terminal status). Every part up to the grant is durable."""
    granting = [index for index, rule in enumerate(rules) if rule.grants is not Action.NONE]
    granted = granting[0] if granting else len(rules) - 1
    if hand_back and (
        len(granting) != 1
        or rules[granted].grants is not Action.DELIVER
        or granted == len(rules) - 1
    ):
        raise SpecError(f"{where}: a hand-back step grants deliver in one part before its last")
    if any(rule.fence is not Fence.NONE for rule in rules[1 : granted + 1]) or (
        not hand_back and granted != len(rules) - 1
    ):
        raise SpecError(f"{where}: only its first part may be fenced, only its last grant")
    own = {
        fence for fence, part in _FENCED_PARTS.items() if f"{part}.{fence}" in rules[granted].sets
    }
    if any(rule.fence not in {Fence.NONE, *own} for rule in rules[granted + 1 :]):
        raise SpecError(f"{where}: a part after the grant is fenced only by the claim it made")
    if not all(rule.durable for rule in rules[: granted + 1]):
        raise SpecError(
            f"{where}: a composed step is durable, so all its parts must be, but those a"
            " hand-back step takes after its grant"
        )
    return granted


def _load_errors(data: Mapping[str, object]) -> dict[ErrorCode, ErrorRule]:
    errors: dict[ErrorCode, ErrorRule] = {}
    for name, row, where in _rows(data, "errors", {"meaning", "remedy"}):
        code = _enum(ErrorCode, name, where)
        errors[code] = ErrorRule(code, _str(row, "meaning", where), _str(row, "remedy", where))
    if set(errors) != set(ErrorCode):
        raise SpecError("[errors] must document every ErrorCode exactly once")
    return errors


_FENCED_PARTS = {Fence.ATTEMPT_ID: "execution", Fence.DELIVERY_ID: "delivery"}
"""The part holding each fence's owner: a fenced transition leaves only statuses that
require it, so the owner it compares is always there."""


EXECUTABLE = frozenset({Status.READY, Status.RELEASED})
"""The statuses decide answers execute for: never claimed, or released by the claim's
owner before the tool had any effect."""


def _check_safety(table: TransitionTable) -> None:
    """Refuse a table that breaks a rule every version of the protocol must keep."""
    if table.initial_status is not Status.READY or table.initial_revision < 1:
        raise SpecError("records must start in ready at a revision of at least 1")
    for status_rule in table.statuses.values():
        if (status_rule.action is Action.EXECUTE) != (status_rule.status in EXECUTABLE):
            raise SpecError(
                "decide must answer execute for ready and released and for no other status"
            )
        if status_rule.terminal != (status_rule.action is Action.NONE):
            raise SpecError(f"status {status_rule.status} is terminal iff its action is none")
        if status_rule.action is Action.HAND_BACK:
            raise SpecError(f"status {status_rule.status}: only a hand-back step grants hand-back")
    claimed = {Status.EXECUTING: Fence.ATTEMPT_ID, Status.UNCERTAIN: Fence.ATTEMPT_ID}
    claimed[Status.DELIVERING] = Fence.DELIVERY_ID
    # Nothing durable builds on a write a store crash can lose (a composed step leaves
    # where its first part, durable, does).
    relaxed = {rule.target for rule in table.transitions.values() if not rule.durable}
    for rule in table.transitions.values():
        if rule.grants is Action.HAND_BACK:
            raise SpecError(f"{rule.name}: only a hand-back step grants hand-back")
        if rule.target is Status.READY:
            raise SpecError(f"{rule.name}: no transition may land in ready")
        if rule.target is Status.RELEASED and rule.sources != (Status.EXECUTING,):
            raise SpecError(f"{rule.name}: only executing may be released")
        for source in rule.sources:
            if table.statuses[source].terminal and (
                rule.target is not source or rule.grants is not Action.NONE
            ):
                raise SpecError(
                    f"{rule.name}: a terminal status may only step to itself, granting none"
                )
            if source in claimed and rule.fence is not claimed[source]:
                raise SpecError(
                    f"{rule.name}: leaving {source} must be fenced by {claimed[source]}"
                )
            fenced_part = _FENCED_PARTS.get(rule.fence)
            if fenced_part is not None and fenced_part not in table.statuses[source].required:
                raise SpecError(
                    f"{rule.name}: its {rule.fence} fence needs {fenced_part} in {source}"
                )
        if rule.grants is Action.EXECUTE and (
            not EXECUTABLE.issuperset(rule.sources) or rule.target is not Status.EXECUTING
        ):
            raise SpecError(f"{rule.name}: only ready or released -> executing may grant execute")
        if not rule.durable and (
            rule.grants is not Action.NONE
            or any(table.statuses[source].action is Action.EXECUTE for source in rule.sources)
        ):
            raise SpecError(
                f"{rule.name}: a non-durable write grants none and leaves no executable status"
            )
        if rule.durable and relaxed.intersection(rule.sources):
            raise SpecError(
                f"{rule.name}: a durable write leaves a status that a non-durable write lands in"
            )


def load_table(text: str) -> TransitionTable:
    """Parse and check a transition table written in the format of spec/transitions.toml.

    Raises:
        SpecError: the text is not TOML, or the table is malformed or breaks a safety rule.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise SpecError(f"the transition table is not valid TOML: {error}") from None
    return table_from_data(data)


def table_from_data(data: Mapping[str, object]) -> TransitionTable:
    """Check parsed table data (as tomllib returns it) and build the table.

    Raises:
        SpecError: the table is malformed or breaks a safety rule of the protocol.
    """
    _keys(
        data,
        "the table",
        {
            "protocol",
            "limits",
            "timestamps",
            "statuses",
            "transitions",
            "composed",
            "promises",
            "errors",
        },
    )
    protocol = _table(data, "protocol")
    _keys(
        protocol,
        "[protocol]",
        {
            "schema_version",
            "initial_status",
            "initial_revision",
            "initial_revision_why",
            "format_why",
            "hand_back",
        },
    )
    limits = _table(data, "limits")
    _keys(limits, "[limits]", set(Limits.__dataclass_fields__))
    timestamps = _table(data, "timestamps")
    _keys(timestamps, "[timestamps]", {"format", "ordering", "ordering_why"})
    promises = _table(data, "promises")
    _keys(promises, "[promises]", {"guarantees", "non_guarantees"})
    initial = _enum(Status, _str(protocol, "initial_status", "protocol"), "protocol")
    transitions = _load_transitions(data)
    table = TransitionTable(
        schema_version=_int(protocol, "schema_version", "protocol"),
        initial_status=initial,
        initial_revision=_int(protocol, "initial_revision", "protocol"),
        initial_revision_why=_str(protocol, "initial_revision_why", "protocol"),
        format_why=_str(protocol, "format_why", "protocol"),
        hand_back=_str(protocol, "hand_back", "protocol"),
        limits=Limits(**{key: _int(limits, key, "limits") for key in limits}),
        statuses=MappingProxyType(_load_statuses(data)),
        transitions=MappingProxyType(transitions),
        composed=MappingProxyType({}),  # pragma: no mutate (read by no safety check)
        timestamp_format=_str(timestamps, "format", "timestamps"),
        timestamp_ordering=_str(timestamps, "ordering", "timestamps"),
        timestamp_ordering_why=_str(timestamps, "ordering_why", "timestamps"),
        guarantees=_strs(promises, "guarantees", "promises"),
        non_guarantees=_strs(promises, "non_guarantees", "promises"),
        errors=MappingProxyType(_load_errors(data)),
    )
    _check_safety(table)
    # The composed steps are checked against transitions that are safe already.
    composed = _load_composed(data, table)
    return replace(table, composed=MappingProxyType(composed))


TABLE: TransitionTable = load_table(spec_file("transitions.toml").read_text(encoding="utf-8"))
"""The protocol this installation implements, loaded from spec/transitions.toml."""
