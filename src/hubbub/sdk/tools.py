"""Tools and resources a participant offers: schemas from type hints, argument validation,
and conversion of return values into MCP results (``mcp.types``).

A tool's arguments are checked against its input schema (JSON Schema, with ``jsonschema``)
before the tool runs. For a tool made from a typed function the schema is derived from the
signature with pydantic, and valid arguments are then converted to the annotated Python types.
"""

from __future__ import annotations

import base64
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, get_type_hints

import jsonschema  # type: ignore[import-untyped]
import mcp.types as mt
import pydantic
import pydantic_core
from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped]

from hubbub.errors import InvalidArguments

Validator = Any
"""A compiled ``jsonschema`` validator (the library ships no type information)."""

EMPTY_OBJECT_SCHEMA: Final[dict[str, Any]] = {"type": "object", "properties": {}}
"""Input schema of a tool that was given none: any object."""
ERROR_META_KEY: Final = "hubbub/error"
"""``_meta`` key on an error ``CallToolResult`` saying what failed (``invalid_arguments``)."""
INVALID_ARGUMENTS: Final = "invalid_arguments"

_CONTENT_TYPES: Final = (
    mt.TextContent,
    mt.ImageContent,
    mt.AudioContent,
    mt.ResourceLink,
    mt.EmbeddedResource,
)


def dump(model: pydantic.BaseModel) -> dict[str, Any]:
    """An MCP model as JSON-ready wire data (camelCase keys, no nulls)."""
    out = model.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert isinstance(out, dict)
    return out


def compile_schema(schema: Mapping[str, Any], what: str) -> Validator:
    """A validator for a JSON Schema (its ``$schema`` dialect, else 2020-12)."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        raise ValueError(f"{what}: not a valid JSON Schema: {exc.message}") from None
    if schema.get("type", "object") != "object":
        raise ValueError(f"{what}: an input schema must describe an object (type: object)")
    validator: Validator = cls(schema)
    return validator


def _path(error: jsonschema.ValidationError) -> str:
    parts = [str(p) for p in error.absolute_path]
    return ".".join(parts) if parts else "(arguments)"


def validation_problems(validator: Validator, arguments: object) -> list[str]:
    """Readable reasons why ``arguments`` fail the schema (empty when they pass)."""
    errors = sorted(validator.iter_errors(arguments), key=lambda e: list(map(str, e.path)))
    return [f"{_path(e)}: {e.message}" for e in errors]


@dataclass
class Tool:
    """A tool: MCP metadata and ``execute(arguments) -> result`` (sync or async).

    ``execute`` receives the arguments dict after it passed ``input_schema``. It may return
    a string, MCP content block(s), a ``CallToolResult``, or any JSON-able value (a dict also
    becomes ``structuredContent``). Use :meth:`from_function` to build one from a typed
    function (``@participant.tool`` does).
    """

    name: str
    execute: Callable[[dict[str, Any]], Any]
    description: str | None = None
    input_schema: dict[str, Any] | None = None
    title: str | None = None
    annotations: mt.ToolAnnotations | None = None
    _validator: Validator = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise ValueError("a tool needs a non-empty name")
        if self.input_schema is None:
            self.input_schema = dict(EMPTY_OBJECT_SCHEMA)
        self._validator = compile_schema(self.input_schema, f"tool {self.name!r}")

    @classmethod
    def from_function(
        cls,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        title: str | None = None,
        annotations: mt.ToolAnnotations | None = None,
    ) -> Tool:
        """A tool from a (typed) function: schema from its signature, description from its
        docstring; valid arguments are converted to the annotated types before the call."""
        tool_name = name or str(getattr(fn, "__name__", ""))
        model, renamed = arguments_model(fn, tool_name)
        schema = model.model_json_schema()

        def execute(arguments: dict[str, Any]) -> Any:
            parsed = model.model_validate(arguments)
            kwargs = {renamed.get(k, k): getattr(parsed, k) for k in type(parsed).model_fields}
            return fn(**kwargs)

        return cls(
            name=tool_name,
            execute=execute,
            description=description if description is not None else inspect.getdoc(fn),
            input_schema=schema,
            title=title,
            annotations=annotations,
        )

    def validate(self, arguments: object) -> dict[str, Any]:
        """Return ``arguments`` if they match the input schema, else raise InvalidArguments."""
        if arguments is None:
            arguments = {}
        problems = validation_problems(self._validator, arguments)
        if problems:
            raise InvalidArguments(
                f"invalid arguments for tool {self.name!r}: {'; '.join(problems)} "
                "(tools/list shows the tool's inputSchema)"
            )
        assert isinstance(arguments, dict)
        return arguments

    async def call(self, arguments: object) -> mt.CallToolResult:
        """Validate, run and convert: the ``CallToolResult`` of one call (exceptions propagate)."""
        args = self.validate(arguments)
        result = self.execute(args)
        if inspect.isawaitable(result):
            result = await result
        return to_call_result(result)

    def to_mcp(self) -> mt.Tool:
        """The MCP ``Tool`` description (for ``tools/list``)."""
        assert self.input_schema is not None
        return mt.Tool(
            name=self.name,
            title=self.title,
            description=self.description,
            input_schema=self.input_schema,
            annotations=self.annotations,
        )


def arguments_model(
    fn: Callable[..., Any], tool_name: str
) -> tuple[type[pydantic.BaseModel], dict[str, str]]:
    """A pydantic model of ``fn``'s parameters, and the map of renamed fields to parameters.

    Parameters whose names collide with pydantic's own attributes get another field name and
    keep theirs as the alias (so the schema shows the real name).
    """
    if not callable(fn):
        raise TypeError(f"a tool must be a function, got {fn!r}")
    signature = inspect.signature(fn)
    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise TypeError(
            f"tool {tool_name!r}: cannot resolve its type hints: {exc} (types named in the "
            "annotations must be importable from the function's module, not local to a function)"
        ) from None
    fields: dict[str, Any] = {}
    renamed: dict[str, str] = {}
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(
                f"tool {tool_name!r}: *{param.name} / **{param.name} cannot be described by a "
                "schema; give every argument a name (or pass input_schema to Tool yourself)"
            )
        if param.kind is param.POSITIONAL_ONLY:
            raise TypeError(f"tool {tool_name!r}: positional-only parameter {param.name!r}")
        annotation = hints.get(param.name, Any)
        default = ... if param.default is inspect.Parameter.empty else param.default
        field_name = param.name
        if field_name.startswith(("model_", "_")) or hasattr(pydantic.BaseModel, field_name):
            field_name = f"arg_{param.name.lstrip('_')}"
            renamed[field_name] = param.name
            fields[field_name] = (
                annotation,
                pydantic.Field(default, alias=param.name),
            )
        else:
            fields[field_name] = (annotation, default)
    model: type[pydantic.BaseModel] = pydantic.create_model(
        f"{tool_name or 'tool'}Arguments", __config__=pydantic.ConfigDict(extra="forbid"), **fields
    )
    return model, renamed


def to_call_result(value: object) -> mt.CallToolResult:
    """Convert a tool's return value into a ``CallToolResult``."""
    if isinstance(value, mt.CallToolResult):
        return value
    if value is None:
        return mt.CallToolResult(content=[])
    if isinstance(value, str):
        return mt.CallToolResult(content=[mt.TextContent(text=value)])
    if isinstance(value, _CONTENT_TYPES):
        return mt.CallToolResult(content=[value])
    if (
        isinstance(value, list | tuple)
        and value
        and all(isinstance(v, _CONTENT_TYPES) for v in value)
    ):
        return mt.CallToolResult(content=list(value))
    data = pydantic_core.to_jsonable_python(value)
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    structured = data if isinstance(data, dict) else None
    return mt.CallToolResult(content=[mt.TextContent(text=text)], structured_content=structured)


def error_result(message: str, reason: str | None = None) -> mt.CallToolResult:
    """An MCP tool error (``isError: true``) with ``message`` as its text."""
    meta = {ERROR_META_KEY: reason} if reason else None
    return mt.CallToolResult(content=[mt.TextContent(text=message)], is_error=True, _meta=meta)


def result_text(result: mt.CallToolResult) -> str:
    """The text of a result's text content blocks, joined by newlines."""
    return "\n".join(c.text for c in result.content if isinstance(c, mt.TextContent))


ResourceReader = Callable[[], Any] | Callable[[], Awaitable[Any]]


@dataclass
class Resource:
    """A resource: an MCP description and ``read() -> str | bytes | JSON-able`` (sync or async).

    ``read`` may also return a complete ``ReadResourceResult``.
    """

    uri: str
    read: ResourceReader
    name: str | None = None
    description: str | None = None
    mime_type: str | None = None
    title: str | None = None

    def __post_init__(self) -> None:
        if not self.uri:
            raise ValueError("a resource needs a uri")

    def to_mcp(self) -> mt.Resource:
        """The MCP ``Resource`` description (for ``resources/list``)."""
        return mt.Resource(
            uri=self.uri,
            name=self.name or self.uri,
            title=self.title,
            description=self.description,
            mime_type=self.mime_type,
        )

    async def contents(self) -> mt.ReadResourceResult:
        """Read the resource into a ``ReadResourceResult``."""
        value = self.read()
        if inspect.isawaitable(value):
            value = await value
        if isinstance(value, mt.ReadResourceResult):
            return value
        if isinstance(value, bytes | bytearray):
            blob = base64.b64encode(bytes(value)).decode()
            return mt.ReadResourceResult(
                contents=[
                    mt.BlobResourceContents(uri=self.uri, mime_type=self.mime_type, blob=blob)
                ]
            )
        if isinstance(value, str):
            text, mime = value, self.mime_type
        else:
            data = pydantic_core.to_jsonable_python(value)
            text, mime = json.dumps(data, ensure_ascii=False), self.mime_type or "application/json"
        return mt.ReadResourceResult(
            contents=[mt.TextResourceContents(uri=self.uri, mime_type=mime, text=text)]
        )


__all__ = [
    "ERROR_META_KEY",
    "INVALID_ARGUMENTS",
    "Resource",
    "Tool",
    "arguments_model",
    "compile_schema",
    "dump",
    "error_result",
    "result_text",
    "to_call_result",
    "validation_problems",
]
