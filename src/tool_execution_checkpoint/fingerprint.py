"""fingerprint: a canonical digest of a tool's input, for Binding.input_fingerprint.

Optional: any stable digest the application prefers works as well. This one encodes the
value as canonical JSON (object keys sorted, no whitespace, UTF-8, non-ASCII not escaped,
numbers as Python's json writes them: integers exactly, floats in their shortest
round-tripping form, so ``1`` and ``1.0`` differ) and hashes it with SHA-256.
"""

from __future__ import annotations

import hashlib
import json

from .errors import CheckpointError, ErrorCode
from .validation import check_json_shape

__all__ = ["fingerprint"]


def fingerprint(value: object) -> str:
    """Return ``sha256:<64 hex digits>`` of ``value``'s canonical JSON.

    Raises:
        CheckpointError: PAYLOAD_NOT_JSON for anything but plain JSON (NaN, infinities,
            lone surrogates, non-str keys, tuples, sets, bytes, other objects);
            PAYLOAD_LIMIT_EXCEEDED past the payload limits on depth (32) and values
            (10,000).
    """
    check_json_shape(value, "value")
    text = json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    encoded: bytes | None
    try:
        encoded = text.encode("utf-8")
    except UnicodeEncodeError:  # its ``object`` is the text: not kept as a context
        encoded = None
    if encoded is None:
        raise CheckpointError(ErrorCode.PAYLOAD_NOT_JSON, "holds a lone surrogate", field="value")
    return f"sha256:{hashlib.sha256(encoded).hexdigest()}"
