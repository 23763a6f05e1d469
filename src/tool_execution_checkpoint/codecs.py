"""How a guarded tool's result is stored as JSON and rebuilt on a replay: the
:class:`ResultCodec` of a return annotation (plain JSON, a TypedDict, whatever pydantic
validates, or a dataclass by its fields)."""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, cast

from .errors import CheckpointError, ErrorCode
from .validation import JSONValue

__all__ = ["JSONCodec", "ResultCodec", "rebuilt", "result_codec", "return_annotation", "to_json"]

T = TypeVar("T")


class ResultCodec(Protocol[T]):
    """How a tool's result is stored as JSON and rebuilt on a replay."""

    def encode(self, value: T) -> JSONValue:
        """The JSON value to store (anything else raises)."""
        ...

    def decode(self, payload: JSONValue) -> T:
        """The result rebuilt from a stored payload."""
        ...


class JSONCodec:
    """A result that is plain JSON is stored as it is."""

    def encode(self, value: Any) -> JSONValue:
        return to_json(value)

    def decode(self, payload: JSONValue) -> Any:
        return payload


@dataclasses.dataclass(frozen=True)
class _PydanticCodec:
    """Any type pydantic can validate: models, dataclasses, TypedDicts, containers."""

    adapter: Any

    def encode(self, value: Any) -> JSONValue:
        """``value`` as JSON of the annotated type. A value of another type (a dict
        returned for a model) is validated as the type first; one that does not validate
        raises. Never a serializer warning: pydantic's quotes the value."""
        try:
            return cast(JSONValue, self.adapter.dump_python(value, mode="json", warnings="error"))
        except ValueError:  # PydanticSerializationError: not a value of the annotated type
            pass
        checked = self.adapter.validate_python(value)
        return cast(JSONValue, self.adapter.dump_python(checked, mode="json", warnings="error"))

    def decode(self, payload: JSONValue) -> Any:
        return self.adapter.validate_python(payload)


@dataclasses.dataclass(frozen=True)
class _DataclassCodec:
    """A dataclass without pydantic: its fields as a JSON object, nested dataclasses
    rebuilt from their annotations."""

    cls: type[Any]

    def encode(self, value: Any) -> JSONValue:
        return to_json(value)

    def decode(self, payload: JSONValue) -> Any:
        return _rebuild(self.cls, payload)


def _rebuild(annotation: Any, payload: JSONValue) -> Any:
    if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
        if not isinstance(payload, dict):
            raise CheckpointError(
                ErrorCode.INVALID_CHECKPOINT,
                "is not an object of the result's fields",
                field="result",
            )
        hints = typing.get_type_hints(annotation)
        fields = {field.name for field in dataclasses.fields(annotation)}
        return annotation(
            **{
                name: _rebuild(hints.get(name, Any), value)
                for name, value in payload.items()
                if name in fields
            }
        )
    return payload


_PLAIN_TYPES = (str, int, float, bool, type(None), dict, list)
_PLAIN_ORIGINS = (dict, list, typing.Union, types.UnionType)


def _plain(annotation: object) -> bool:
    """Whether values of ``annotation`` are plain JSON already (so stored as they are)."""
    if annotation in (inspect.Signature.empty, Any, None) or annotation in _PLAIN_TYPES:
        return True
    if typing.get_origin(annotation) in _PLAIN_ORIGINS:
        return all(_plain(argument) for argument in typing.get_args(annotation))
    return False


def return_annotation(tool: Callable[..., Any]) -> object:
    """The tool's return annotation, resolved without needing its parameters' (a local
    context class, say)."""
    raw = getattr(tool, "__annotations__", {}).get("return", Any)
    if not isinstance(raw, str):
        return raw
    holder = types.SimpleNamespace(__annotations__={"return": raw})
    try:
        return typing.get_type_hints(holder, globalns=getattr(tool, "__globals__", None))["return"]
    except Exception:  # an unresolvable name: the caller says how to store the result
        pass
    # Raised outside the except: the NameError (it quotes the name) is not the context.
    raise CheckpointError(
        ErrorCode.INVALID_ARGUMENT,
        "cannot be resolved: pass codec= to checkpointed",
        field="return annotation",
    )


def result_codec(annotation: object) -> ResultCodec[Any]:
    """The codec for a return annotation: plain JSON, a TypedDict (or no annotation) as it
    is; with pydantic installed, whatever pydantic validates (a model, a dataclass, a
    container of them); without it, a dataclass by its fields.

    Raises:
        CheckpointError: INVALID_ARGUMENT for an annotation pydantic refuses.
    """
    if _plain(annotation):
        return JSONCodec()
    if typing.is_typeddict(annotation):  # a dict at run time, stored and read as one
        return JSONCodec()
    try:
        import pydantic  # noqa: PLC0415 - optional: only a typed result needs it
    except ImportError:
        if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
            return _DataclassCodec(annotation)
        return JSONCodec()
    try:
        return _PydanticCodec(pydantic.TypeAdapter(cast(Any, annotation)))
    except pydantic.PydanticUserError:
        pass
    # Raised outside the except: pydantic's error (it names the type) is not the context.
    raise CheckpointError(
        ErrorCode.INVALID_ARGUMENT,
        "is a type pydantic cannot store: pass codec= to checkpointed",
        field="return annotation",
    )


def to_json(value: object) -> JSONValue:
    """``value`` as plain JSON, for fingerprints and untyped results: JSON as it is,
    tuples as lists, pydantic models and dataclasses as their fields (pydantic's
    ``model_dump(mode="json")`` where it applies). Anything else raises
    :class:`~.errors.CheckpointError` PAYLOAD_NOT_JSON naming only its type."""
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, dict):
        return {key: to_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(item) for item in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return cast(JSONValue, dump(mode="json"))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            field.name: to_json(getattr(value, field.name)) for field in dataclasses.fields(value)
        }
    raise CheckpointError(
        ErrorCode.PAYLOAD_NOT_JSON, f"holds a {type(value).__name__}", field="value"
    )


def rebuilt(codec: ResultCodec[Any], stored: JSONValue) -> Any:
    """The stored result rebuilt by ``codec``; a stored value it refuses is CheckpointError
    INVALID_CHECKPOINT naming only the refusal's type, raised outside the ``except``:
    the codec's error (pydantic's ValidationError quotes its input) holds the payload."""
    refused: str | None = None
    try:
        return codec.decode(stored)
    except Exception as error:
        refused = type(error).__name__
    raise CheckpointError(
        ErrorCode.INVALID_CHECKPOINT,
        f"does not rebuild as the tool's return type ({refused}): pass codec= to read it",
        field="result.payload",
    )
