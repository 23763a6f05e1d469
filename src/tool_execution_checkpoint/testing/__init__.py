"""Test tools for checkpoint stores: the model-based harness, fault injection, a threaded
stress check and a pytest base class that runs them all against a store factory.

Install with the ``testing`` extra (it brings hypothesis, pytest and jsonschema)::

    pip install 'tool-execution-checkpoint[testing]'

Then, in a test file::

    from tool_execution_checkpoint.testing import StoreConformance

    class TestMyStore(StoreConformance):
        def make_store(self):
            return MyStore()
"""

from .adapters import SyncStoreAdapter, as_sync_store
from .conformance import OperableStoreConformance, StoreConformance, read_back_landed
from .faults import Fault, FaultyStore
from .harness import ProtocolMachine, SendAnswer, ToolAnswer, Worker, protocol_machine
from .identity import IdentityMachine, IdentityScheme, identity_machine
from .profiles import PROFILES, HarnessProfile, active_profile
from .stress import StressReport, threaded_stress

__all__ = [
    "PROFILES",
    "Fault",
    "FaultyStore",
    "HarnessProfile",
    "IdentityMachine",
    "IdentityScheme",
    "OperableStoreConformance",
    "ProtocolMachine",
    "SendAnswer",
    "StoreConformance",
    "StressReport",
    "SyncStoreAdapter",
    "ToolAnswer",
    "Worker",
    "active_profile",
    "as_sync_store",
    "identity_machine",
    "protocol_machine",
    "read_back_landed",
    "threaded_stress",
]
