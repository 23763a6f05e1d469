"""Create, decide and transition: pure functions whose guards are read off the table.

Each function takes a record, either a :class:`~tool_execution_checkpoint.Checkpoint` or
the mapping loaded from storage, validates it once, and returns a value; nothing is read
or written anywhere. A :class:`~tool_execution_checkpoint.records.StoredRecord` (the
mapping a store of this package reads) was validated when it was read: only its payload's
size is checked against the call's limit. A transition returns a :class:`Transition`
``(action, expected_revision, next)``: the host writes ``next`` with its store's atomic
compare-and-swap from ``expected_revision`` and does ``action`` only if that swap won.

Which statuses a transition leaves from, where it lands, which fence it checks and what
it grants all come from :data:`~tool_execution_checkpoint.table.TABLE`. The functions
here only build the parts of the next record that the table says the transition sets.
The table's composed steps (:func:`create_claimed`, :func:`complete_and_claim_delivery`,
and :func:`complete_and_deliver` for a host whose delivery is the hand-back) are one
write each: their postcondition checks that the next record is exactly the one their
parts make, one after the other, at one past the stored revision.

The package is in three modules: :mod:`.engine` (the vocabulary, the loader, the guard,
create, decide and validate), :mod:`.steps` (the transitions and the composed steps, each
after one prologue) and :mod:`.postconditions`. The icontract postconditions state what
the transitions promise and catch bugs in them; they never signal a caller's mistake
(bad input raises :class:`CheckpointError` whether contracts are on or off). They are off
unless the environment sets ``TOOL_CHECKPOINT_CONTRACTS=1`` (and Python does not run
with ``-O``): they check this library's own code, which the test suite, the explorer and
the mutation run exercise with them on, and they cost a production call more than the
rest of the core does.
"""

from . import steps
from .engine import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    Decision,
    RecordLike,
    Timestamp,
    Transition,
    create_checkpoint,
    decide_checkpoint,
    validate_checkpoint,
)
from .postconditions import CONTRACTS_ENABLED
from .steps import *  # noqa: F403 (the transitions and composed steps: steps.__all__)

__all__ = [
    "CONTRACTS_ENABLED",
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "Decision",
    "RecordLike",
    "Timestamp",
    "Transition",
    "create_checkpoint",
    "decide_checkpoint",
    "validate_checkpoint",
]
__all__ += steps.__all__
