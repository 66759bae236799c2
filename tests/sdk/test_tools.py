"""Tools and resources without a gateway: schemas from hints, validation, result conversion."""

from __future__ import annotations

import base64
from typing import Any, Literal

import mcp.types as mt
import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hubbub.errors import InvalidArguments
from hubbub.sdk import Resource, Tool
from hubbub.sdk.tools import ERROR_META_KEY, error_result, to_call_result


def search(
    a: int,
    b: float,
    name: str = "x",
    tags: list[str] | None = None,
    mode: Literal["fast", "slow"] = "fast",
) -> dict[str, Any]:
    """Search for things.

    Longer explanation.
    """
    return {"a": a, "b": b, "name": name, "tags": tags, "mode": mode}


SEARCH = Tool.from_function(search)
KEYS = ["a", "b", "name", "tags", "mode", "extra"]

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["fast", "slow", "x", ""])
    | st.text(max_size=5)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=6,
)


def is_int(v: object) -> bool:
    return (isinstance(v, int) and not isinstance(v, bool)) or (
        isinstance(v, float) and v.is_integer()
    )


def is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def valid_for_search(args: dict[str, Any]) -> bool:
    """The reference: exactly the arguments ``search``'s signature allows."""
    if set(args) - {"a", "b", "name", "tags", "mode"}:
        return False
    if "a" not in args or not is_int(args["a"]):
        return False
    if "b" not in args or not is_number(args["b"]):
        return False
    if "name" in args and not isinstance(args["name"], str):
        return False
    if "tags" in args and args["tags"] is not None:
        tags = args["tags"]
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            return False
    return not ("mode" in args and args["mode"] not in ("fast", "slow"))


def test_schema_comes_from_the_type_hints_and_the_docstring() -> None:
    tool = SEARCH.to_mcp()
    assert tool.name == "search"
    assert tool.description == "Search for things.\n\nLonger explanation."
    schema = tool.input_schema
    assert schema["type"] == "object"
    assert schema["required"] == ["a", "b"]
    assert schema["additionalProperties"] is False
    props = schema["properties"]
    assert props["a"]["type"] == "integer"
    assert props["b"]["type"] == "number"
    assert props["name"]["default"] == "x"
    assert props["mode"]["enum"] == ["fast", "slow"]


@settings(deadline=None)  # a shared machine may take longer than hypothesis' 200 ms per example
@given(
    st.dictionaries(st.sampled_from(KEYS), json_values)
    | st.fixed_dictionaries(
        {"a": st.integers(), "b": st.floats(allow_nan=False, allow_infinity=False)},
        optional={
            "name": json_values,
            "tags": st.none() | st.lists(st.text(max_size=4), max_size=3) | json_values,
            "mode": st.sampled_from(["fast", "slow", "medium"]),
        },
    )
)
async def test_validation_accepts_exactly_the_valid_arguments(args: dict[str, Any]) -> None:
    if valid_for_search(args):
        assert SEARCH.validate(args) == args
        # and what the schema accepts, the typed call accepts too (schema and types agree)
        result = await SEARCH.call(args)
        assert not result.is_error
        assert result.structured_content is not None
        assert result.structured_content["a"] == int(args["a"])
    else:
        with pytest.raises(InvalidArguments, match="invalid arguments for tool 'search'"):
            SEARCH.validate(args)


def test_validation_message_names_every_problem() -> None:
    with pytest.raises(InvalidArguments) as info:
        SEARCH.validate({"a": "1", "extra": 1})
    text = str(info.value)
    assert "'b' is a required property" in text
    assert "a: '1' is not of type 'integer'" in text
    assert "'extra' was unexpected" in text
    assert "inputSchema" in text  # says where to look


def test_arguments_must_be_an_object() -> None:
    with pytest.raises(InvalidArguments, match="is not of type 'object'"):
        SEARCH.validate([1, 2])
    assert Tool.from_function(lambda: "hi", name="hello").validate(None) == {}


def test_a_given_schema_is_used_and_checked() -> None:
    seen: list[dict[str, Any]] = []
    tool = Tool(
        name="echo",
        execute=lambda args: seen.append(args) or "ok",
        input_schema={
            "type": "object",
            "properties": {"q": {"type": "string", "minLength": 2}},
            "required": ["q"],
        },
    )
    with pytest.raises(InvalidArguments, match="q: 'x' is too short"):
        tool.validate({"q": "x"})
    assert tool.validate({"q": "xy"}) == {"q": "xy"}
    with pytest.raises(ValueError, match="not a valid JSON Schema"):
        Tool(name="bad", execute=lambda a: a, input_schema={"type": "object", "required": 3})
    with pytest.raises(ValueError, match="must describe an object"):
        Tool(name="bad", execute=lambda a: a, input_schema={"type": "string"})
    assert Tool(name="any", execute=lambda a: a).input_schema == {
        "type": "object",
        "properties": {},
    }


async def test_parameters_named_like_pydantic_attributes_keep_their_names() -> None:
    def odd(json: str, model_name: str, schema: int = 1) -> str:
        return f"{json}|{model_name}|{schema}"

    tool = Tool.from_function(odd)
    assert set(tool.to_mcp().input_schema["properties"]) == {"json", "model_name", "schema"}
    result = await tool.call({"json": "j", "model_name": "m", "schema": 2})
    assert result.content == [mt.TextContent(text="j|m|2")]


def test_functions_a_schema_cannot_describe_are_refused() -> None:
    def star(*args: int) -> int:
        return sum(args)

    def kw(**kwargs: int) -> int:
        return len(kwargs)

    for fn in (star, kw):
        with pytest.raises(TypeError, match="give every argument a name"):
            Tool.from_function(fn)


class Point(pydantic.BaseModel):
    x: int
    y: int


async def test_typed_arguments_are_converted_before_the_call() -> None:
    async def norm(p: Point, scale: float = 1.0) -> float:
        assert isinstance(p, Point)
        return (p.x**2 + p.y**2) ** 0.5 * scale

    tool = Tool.from_function(norm)
    result = await tool.call({"p": {"x": 3, "y": 4}, "scale": 2})
    assert result.content == [mt.TextContent(text="10.0")]


@pytest.mark.parametrize(
    ("value", "texts", "structured"),
    [
        ("hello", ["hello"], None),
        (None, [], None),
        (3, ["3"], None),
        ({"k": [1, 2]}, ['{"k":[1,2]}'], {"k": [1, 2]}),
        ([1, "a"], ['[1,"a"]'], None),
        (mt.TextContent(text="block"), ["block"], None),
        ([mt.TextContent(text="a"), mt.TextContent(text="b")], ["a", "b"], None),
    ],
)
def test_return_values_become_call_results(
    value: object, texts: list[str], structured: object
) -> None:
    result = to_call_result(value)
    assert [c.text for c in result.content if isinstance(c, mt.TextContent)] == texts
    assert result.structured_content == structured
    assert result.is_error is False


def test_a_call_result_passes_through_and_errors_carry_their_reason() -> None:
    given_result = mt.CallToolResult(content=[], is_error=True)
    assert to_call_result(given_result) is given_result
    err = error_result("nope", "invalid_arguments")
    assert err.is_error and err.meta == {ERROR_META_KEY: "invalid_arguments"}
    assert err.content == [mt.TextContent(text="nope")]


async def test_resources_read_text_bytes_and_json() -> None:
    text = await Resource(uri="notes://a", read=lambda: "hi", mime_type="text/plain").contents()
    assert text.contents == [
        mt.TextResourceContents(uri="notes://a", mime_type="text/plain", text="hi")
    ]

    async def raw() -> bytes:
        return b"\x00\x01"

    blob = await Resource(uri="bin://b", read=raw).contents()
    item = blob.contents[0]
    assert isinstance(item, mt.BlobResourceContents)
    assert base64.b64decode(item.blob) == b"\x00\x01"
    data = await Resource(uri="cfg://c", read=lambda: {"k": 1}).contents()
    first = data.contents[0]
    assert isinstance(first, mt.TextResourceContents)
    assert first.text == '{"k": 1}' and first.mime_type == "application/json"
    assert Resource(uri="cfg://c", read=lambda: 1).to_mcp().name == "cfg://c"
