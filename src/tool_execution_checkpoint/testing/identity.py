"""The identity machine: agent hosts drive guarded tools through the ways frameworks retry,
and every intended effect must happen exactly once, with its own result.

:func:`identity_machine` returns a Hypothesis ``RuleBasedStateMachine`` class. Its hosts
hold a few conversations. In each turn the model means some calls (identical intents may
repeat in one turn and across turns), and the host runs them through real
:class:`~tool_execution_checkpoint.ToolGuard` guards over a
:class:`~tool_execution_checkpoint.MemoryStore`, as a framework adapter does. An attempt of
a turn may:

- get tool call ids the provider regenerates (``toolu_<n>``, new every response) or repeats
  (``call_<position>`` in every response, as some models do);
- order the turn's calls anew;
- word anew the argument that is not part of the intent (``note``; each tool declares its
  ``intent``);
- be retried by the model when a call is refused (the framework posts the refusal as a
  tool error and the model calls again, under a new id);
- crash: the host dies after some calls, the tools ran and their hand-back is lost, and the
  turn is resumed by a new attempt.

How the host names its calls is the :class:`IdentityScheme` under test: by default the
core's, each attempt of a turn inside :func:`~tool_execution_checkpoint.call_scope`, with
the provider's id passed as the framework id. Subclass it to model a broken one.

After every step the invariants hold: an attempt of a turn that did not crash answered
every call (so completed the turn); no intent of a turn takes effect more often than the
model meant it; a completed turn's intents each took effect exactly as often as meant
(never zero); every result handed back is the receipt of an effect made for that very
intent in that very turn; and no two calls of a completed turn share one result. Each
tool's receipt names the intent it served, so a mix-up is visible; messages name intents
by label, never by argument values.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections import Counter
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from ..errors import CheckpointError
from ..guard import CallNotAnswered, ToolGuard, ToolRaisedEarlier
from ..identity import call_scope
from ..stores.memory import MemoryStore

__all__ = ["INTENTS", "IdentityMachine", "IdentityScheme", "PlannedIntent", "identity_machine"]

MASK = "**********"
MODEL_RETRIES = 1
"""How often the model calls a refused call again in the same attempt."""


@dataclasses.dataclass(frozen=True, repr=False)
class _Secret:
    """A secret that shows as pydantic's ``SecretStr`` does, used when pydantic is absent."""

    value: str

    def get_secret_value(self) -> str:
        return self.value

    def __str__(self) -> str:
        return MASK

    def __repr__(self) -> str:
        return f"_Secret({MASK!r})"


def _secret(value: str) -> object:
    """``value`` as a pydantic ``SecretStr`` (a look-alike without pydantic installed)."""
    try:
        from pydantic import SecretStr  # noqa: PLC0415 - optional: not in the testing extra
    except ImportError:  # the testing extra does not bring pydantic
        return _Secret(value)
    return SecretStr(value)


@dataclasses.dataclass(frozen=True)
class PlannedIntent:
    """One intent the model may mean: a tool and the arguments that identify its effect.

    Attributes:
        label: How messages name the intent.
        tool: The tool's name.
        identifying: The tool's ``intent`` arguments.
    """

    label: str
    tool: str
    identifying: Mapping[str, object]


INTENTS = (
    PlannedIntent("email-ann", "send_email", {"to": "ann@example.com", "template": "welcome"}),
    PlannedIntent("email-bob", "send_email", {"to": "bob@example.com", "template": "welcome"}),
    PlannedIntent("charge-card-1", "charge", {"card": _secret("4111111111111111"), "amount": 5}),
    PlannedIntent("charge-card-2", "charge", {"card": _secret("5500000000000004"), "amount": 5}),
)
"""Two intents per tool, so that an ordinal per tool meets two intents; the two charges
differ only in a secret."""

TOOL_INTENTS = {planned.tool: frozenset(planned.identifying) for planned in INTENTS}
"""Each tool's declared ``intent``: its other argument, ``note``, is worded anew each time."""


class IdentityScheme:
    """How the host names its calls; this one is the core's. Each attempt of a turn runs
    inside ``call_scope("<conversation>/turn-<n>")`` and the provider's tool call id is
    passed as the framework id (the scope wins over it). A new instance serves each run."""

    def turn(self, conversation: str, number: int) -> AbstractContextManager[object]:
        """The block around one attempt of turn ``number`` of ``conversation``."""
        return call_scope(f"{conversation}/turn-{number}")

    def framework_id(
        self,
        conversation: str,
        provider_id: str,
        guard: ToolGuard,
        arguments: Mapping[str, object],
    ) -> str | None:
        """The framework id the adapter passes to ``guard`` for one call."""
        del conversation, guard, arguments  # the provider's id, as the adapter has it
        return provider_id

    def fingerprinted(self, arguments: Mapping[str, object]) -> Mapping[str, object]:
        """The call's arguments as the guard fingerprints them."""
        return arguments


@dataclasses.dataclass
class Turn:
    """One turn of a conversation: the intents the model means (by label), and the receipts
    handed to the attempt that completed it (None while the turn is open)."""

    conversation: str
    number: int
    intents: list[str]
    receipts: list[dict[str, Any]] | None = None

    @property
    def name(self) -> str:
        return f"{self.conversation}/turn-{self.number}"


@dataclasses.dataclass(frozen=True)
class Answer:
    """A result handed back to a call of ``label`` in ``turn``."""

    turn: str
    label: str
    receipt: object


class IdentityMachine(RuleBasedStateMachine):
    """The machine's state and steps; :func:`identity_machine` gives a runnable subclass."""

    scheme: ClassVar[type[IdentityScheme]] = IdentityScheme
    conversation_count: ClassVar[int] = 2

    def __init__(self) -> None:
        super().__init__()
        self.identity = type(self).scheme()
        store = MemoryStore()
        self.guards = {
            tool: ToolGuard(store, tool_name=tool, namespace="identity", intent=intent)
            for tool, intent in TOOL_INTENTS.items()
        }
        self.turns: dict[str, list[Turn]] = {
            f"conv-{index}": [] for index in range(self.conversation_count)
        }
        self.effects: list[str] = []  # the name of the turn each effect was made for
        self.effect_counts: Counter[tuple[str, str]] = Counter()
        self.answers: list[Answer] = []
        self.unanswered: list[str] = []  # turns an attempt without a crash left open
        self.running = ""
        self.ids = itertools.count(1)
        self.attempts = itertools.count(1)

    # --- the tools: each effect is counted and its receipt names the intent it served --

    def _tool(self, tool: str, arguments: Mapping[str, object]) -> dict[str, Any]:
        label = next(
            planned.label
            for planned in INTENTS
            if planned.tool == tool
            and all(arguments[name] == value for name, value in planned.identifying.items())
        )
        self.effects.append(self.running)
        self.effect_counts[(self.running, label)] += 1
        return {"intent": label, "effect": len(self.effects) - 1}

    # --- the host -----------------------------------------------------------------------

    def open_turn(self, conversation: str, intents: list[str]) -> Turn:
        """The conversation's turn not yet completed, opened with ``intents`` if none is."""
        turns = self.turns[conversation]
        if not turns or turns[-1].receipts is not None:
            turns.append(Turn(conversation, len(turns) + 1, intents))
        return turns[-1]

    def attempt(
        self, turn: Turn, order: list[int], crash_after: int | None, positional_ids: bool
    ) -> None:
        """One attempt of ``turn``: its calls in ``order``, new wording of every ``note``,
        the host dying after ``crash_after`` calls (None: it does not). The turn is
        completed when every call was answered and the turn's block did not fail; an
        attempt without a crash that does not complete it is kept in ``unanswered``."""
        calls = [index for index in order if index < len(turn.intents)]
        wording = f"as worded in attempt {next(self.attempts)}"
        answered: dict[int, dict[str, Any]] = {}
        completed = False
        try:
            with self.identity.turn(turn.conversation, turn.number):
                for position, index in enumerate(calls):
                    if position == crash_after:
                        break  # the host dies: what was handed back is lost
                    planned = next(p for p in INTENTS if p.label == turn.intents[index])
                    arguments = {**planned.identifying, "note": wording}
                    receipt = self._call(turn, planned, arguments, position, positional_ids)
                    if receipt is not None:
                        answered[index] = receipt
            completed = crash_after is None and len(answered) == len(turn.intents)
        except (CallNotAnswered, CheckpointError):
            pass  # the turn failed for the host
        if completed:
            turn.receipts = list(answered.values())
        elif crash_after is None:
            self.unanswered.append(turn.name)

    def _call(
        self,
        turn: Turn,
        planned: PlannedIntent,
        arguments: dict[str, object],
        position: int,
        positional_ids: bool,
    ) -> dict[str, Any] | None:
        """One call as the framework makes it; a refusal is posted to the model as a tool
        error and the model calls again. Returns the result handed back, or None."""
        guard = self.guards[planned.tool]
        tool: Callable[[], dict[str, Any]] = functools.partial(self._tool, planned.tool, arguments)
        for _ in range(1 + MODEL_RETRIES):
            provider_id = f"call_{position}" if positional_ids else f"toolu_{next(self.ids)}"
            framework_id = self.identity.framework_id(
                turn.conversation, provider_id, guard, arguments
            )
            self.running = turn.name
            try:
                receipt = guard.call(framework_id, self.identity.fingerprinted(arguments), tool)
            except (CallNotAnswered, CheckpointError, ToolRaisedEarlier):
                continue
            self.answers.append(Answer(turn.name, planned.label, receipt))
            return receipt
        return None

    # --- invariants ---------------------------------------------------------------------

    def check_identity(self) -> None:
        """Everything that must hold after every step; raises AssertionError if not."""
        assert not self.unanswered, (
            f"an attempt of {self.unanswered[0]} without a crash left a call unanswered"
        )
        for answer in self.answers:
            receipt = answer.receipt
            served = receipt.get("intent") if isinstance(receipt, dict) else None
            assert served == answer.label, (
                f"a call of {answer.label} in {answer.turn} was handed the result of {served}"
            )
            assert isinstance(receipt, dict)
            made_for = self.effects[receipt["effect"]]
            assert made_for == answer.turn, (
                f"a call of {answer.label} in {answer.turn} was handed the result of an "
                f"effect made for {made_for}"
            )
        for turns in self.turns.values():
            for turn in turns:
                for label, meant in Counter(turn.intents).items():
                    made = self.effect_counts[(turn.name, label)]
                    assert made <= meant, (
                        f"{label} in {turn.name} took effect more often than meant "
                        f"(made {made}, meant {meant})"
                    )
                    assert turn.receipts is None or made == meant, (
                        f"{label} in {turn.name} completed with fewer effects than meant "
                        f"(made {made}, meant {meant})"
                    )
                if turn.receipts is not None:
                    effects = {receipt["effect"] for receipt in turn.receipts}
                    assert len(effects) == len(turn.receipts), (
                        f"two calls in {turn.name} were handed one result"
                    )


def identity_machine(
    scheme: type[IdentityScheme] = IdentityScheme,
    *,
    conversations: int = 2,
    max_calls: int = 3,
) -> type[IdentityMachine]:
    """Return a state-machine class that checks ``scheme`` (see the module docstring).

    Args:
        scheme: How the host names its calls: the core's, or a subclass.
        conversations: How many conversations the hosts hold.
        max_calls: The most calls the model means in one turn.
    """
    conversation = st.integers(min_value=0, max_value=conversations - 1)
    intents = st.lists(
        st.sampled_from([planned.label for planned in INTENTS]), min_size=1, max_size=max_calls
    )
    crash = st.none() | st.integers(min_value=0, max_value=max_calls)
    chosen = scheme

    class Machine(IdentityMachine):
        scheme = chosen
        conversation_count = conversations

        @rule(
            conversation=conversation,
            intents=intents,
            order=st.permutations(range(max_calls)),
            crash_after=crash,
            positional_ids=st.booleans(),
        )
        def host_attempts_a_turn(
            self,
            conversation: int,
            intents: list[str],
            order: list[int],
            crash_after: int | None,
            positional_ids: bool,
        ) -> None:
            """Attempt the open turn of a conversation (opening it with ``intents`` when
            the last one completed)."""
            turn = self.open_turn(f"conv-{conversation}", intents)
            self.attempt(turn, order, crash_after, positional_ids)

        @invariant()
        def identity_holds(self) -> None:
            self.check_identity()

    Machine.__name__ = Machine.__qualname__ = f"{scheme.__name__}IdentityMachine"
    return Machine
