"""Converting a reviewer's JSON edit to the editable parameter's annotated type, strictly."""

from __future__ import annotations

import datetime as dt
import enum
import functools
import inspect
import json
import typing
import uuid
from decimal import Decimal
from typing import TYPE_CHECKING, Annotated, Any, Optional, Union

import pytest
from dateutil.tz import tzutc
from hypothesis import given, settings
from hypothesis import strategies as st

from approval_guard._codec.exact_json import JSONNumber, load_json
from approval_guard._codec.serialize import MAX_DEPTH, to_json_value
from approval_guard._options.convert import editable_converters
from approval_guard._options.converters import Converter, EditError
from approval_guard.exceptions import ArgumentSerializationError, ConfigurationError

if TYPE_CHECKING:
    from collections import OrderedDict  # only for the type checker: unresolvable at run time


class Currency(enum.Enum):
    EUR = "EUR"
    USD = "USD"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Switch(enum.Enum):
    ON = True
    OFF = False


class Mixed(enum.Enum):
    NUMBER = 1
    TEXT = "1"
    PAIR = (1, 2)
    PRICE = Decimal("1.50")


class Twin(enum.Enum):
    TUPLE = (1, 2)
    LIST = [1, 2]  # not hashable, still a member; its JSON is TUPLE's


class Odd(enum.Enum):
    OBJECT = object()
    OK = "ok"


class Code(str):
    """A str subclass: what it means beyond str is unknown, so edits of it are refused."""


class Count(int):
    """An int subclass, refused for the same reason."""


def converter(annotation: Any) -> Converter:
    """The converter for one parameter annotated with the object ``annotation``."""

    def tool(value):  # type: ignore[no-untyped-def]  # the signature below carries the type
        return value

    param = inspect.Parameter("value", inspect.Parameter.KEYWORD_ONLY, annotation=annotation)
    return editable_converters(tool, inspect.Signature([param]), ["value"])["value"]


def converters_of(fn: Any, *names: str) -> dict[str, Converter]:
    return editable_converters(fn, inspect.signature(fn), names)


def refused(convert: Converter, value: Any) -> str:
    """The message of the EditError ``convert`` raises for ``value``."""
    with pytest.raises(EditError) as info:
        convert(value)
    return str(info.value)


# -- tools with string annotations (this module has `from __future__ import annotations`) --


def refund(
    order_id: uuid.UUID,
    amount: Decimal,
    currency: Currency = Currency.EUR,
    note: str | None = None,
    lines: list[dict[str, Decimal]] | None = None,
    when: Optional[dt.date] = None,  # noqa: UP045 (typing.Optional is what this tests)
    tag: Annotated[str, "shown to the reviewer"] = "",
    *,
    priority: Union[int, None] = None,  # noqa: UP007 (typing.Union is what this tests)
) -> None:
    """A tool of every resolvable kind of annotation."""


def partly_unresolvable(amount: Decimal, cache: OrderedDict[str, int]) -> None:
    """``cache``'s annotation names a TYPE_CHECKING-only import: get_type_hints fails."""


def unannotated(amount, note: str) -> None:  # type: ignore[no-untyped-def]
    """``amount`` has no annotation."""


def shapes(a, /, b: int, *args: int, c: int, **kwargs: int) -> None:  # type: ignore[no-untyped-def]
    """One parameter of each kind."""


class CallableTool:
    def __call__(self, amount: Decimal, count: int) -> None:
        """A callable object: its __call__'s annotations are the parameters'."""

    amount: str  # an attribute's annotation, not the parameter's


class Service:
    def charge(self, amount: Decimal) -> None:
        """A method: bound, its signature has no ``self``."""


@functools.wraps(refund)
def wrapped_refund(*args: Any, **kwargs: Any) -> None:
    """A wrapper as functools.wraps leaves it: the signature and hints are refund's."""


# -- decoration time ---------------------------------------------------------


def test_string_annotations_of_a_module_level_function_resolve() -> None:
    """`from __future__ import annotations` leaves strings; get_type_hints resolves them."""
    names = ("order_id", "amount", "currency", "note", "lines", "when", "tag", "priority")
    got = converters_of(refund, *names)
    assert set(names) == set(got)
    order = "12345678-1234-5678-1234-567812345678"
    assert uuid.UUID(order) == got["order_id"](order)
    assert "12.50" == str(got["amount"]("12.50"))
    assert Currency.USD is got["currency"]("USD")
    assert got["note"](None) is None
    assert "hi" == got["note"]("hi")
    assert [{"p": Decimal("1.5")}] == got["lines"]([{"p": "1.5"}])
    assert got["lines"](None) is None
    assert dt.date(2024, 2, 29) == got["when"]("2024-02-29")
    assert "x" == got["tag"]("x")
    assert 3 == got["priority"](3)
    assert got["priority"](None) is None


def test_a_wrapped_function_and_a_method_and_a_callable_object_resolve() -> None:
    """functools.wraps wrappers, bound methods and __call__ annotations all resolve."""
    assert Decimal("2") == converters_of(wrapped_refund, "amount")["amount"]("2")
    assert Decimal("3") == converters_of(Service().charge, "amount")["amount"]("3")
    got = converters_of(CallableTool(), "amount", "count")
    assert Decimal("4") == got["amount"]("4")  # the parameter's Decimal, not the attribute's str
    assert 5 == got["count"](5)


def test_one_parameter_resolves_when_another_annotation_cannot() -> None:
    """A TYPE_CHECKING-only name elsewhere in the signature does not stop `amount` resolving."""
    assert Decimal("1.5") == converters_of(partly_unresolvable, "amount")["amount"]("1.5")


def test_an_annotation_that_cannot_be_resolved_is_refused() -> None:
    """A string annotation naming nothing importable is a ConfigurationError."""
    with pytest.raises(ConfigurationError, match="'cache' of partly_unresolvable could not be"):
        converters_of(partly_unresolvable, "cache")


def test_a_raw_annotation_object_is_used_when_there_are_no_hints() -> None:
    """A signature whose annotation is a type object (not a string) is used as it is."""
    assert 7 == converter(int)(7)


def test_a_missing_annotation_is_refused() -> None:
    """An unannotated editable parameter cannot be converted: ConfigurationError says so."""
    with pytest.raises(ConfigurationError) as info:
        converters_of(unannotated, "amount")
    assert (
        "editable parameter 'amount' of unannotated has no type annotation, so an edit of it "
        "cannot be converted; annotate it or leave it out of editable"
    ) == str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("name", "kind"),
    [("a", "positional-only"), ("args", "variadic positional"), ("kwargs", "variadic keyword")],
)
def test_a_parameter_not_passable_by_keyword_is_refused(name: str, kind: str) -> None:
    """Positional-only, *args and **kwargs parameters cannot be edited."""
    with pytest.raises(ConfigurationError, match=f"'{name}' of shapes is {kind}"):
        converters_of(shapes, name)


def test_positional_or_keyword_and_keyword_only_parameters_are_editable() -> None:
    """The two kinds that can be passed by keyword are accepted."""
    assert {"b", "c"} == set(converters_of(shapes, "b", "c"))


def test_an_unknown_name_is_refused() -> None:
    """A name that is not a parameter is a ConfigurationError naming it."""
    with pytest.raises(ConfigurationError, match="editable names 'amonut', which is not a param"):
        converters_of(refund, "amonut")


@pytest.mark.parametrize("names", ["amount", b"amount"])
def test_names_given_as_one_string_are_refused(names: Any) -> None:
    """editable="amount" would mean six one-letter names: refused, with the fix."""
    with pytest.raises(ConfigurationError, match=r"not one string; write editable=\('amount',\)"):
        editable_converters(refund, inspect.signature(refund), names)


def test_a_name_that_is_not_a_string_is_refused() -> None:
    """Names must be strings."""
    with pytest.raises(ConfigurationError, match="editable holds a int"):
        editable_converters(refund, inspect.signature(refund), [1])  # type: ignore[list-item]


def test_no_names_give_no_converters() -> None:
    """An empty editable is fine."""
    assert {} == editable_converters(refund, inspect.signature(refund), ())


@pytest.mark.parametrize(
    ("annotation", "shown"),
    [
        (Any, "typing.Any"),
        (Union[int, str], "typing.Union[int, str]"),  # noqa: UP007
        (int | str, "int | str"),
        (int | str | None, "int | str | None"),
        (Code, "Code"),
        (Count, "Count"),
        (tuple, "tuple"),
        (tuple[int, str], "tuple[int, str]"),
        (dict[int, str], "dict[int, str]"),
        (set[int], "set[int]"),
        (bytes, "bytes"),
        (object, "object"),
        (type(None), "NoneType"),
        (dt.time, "datetime.time"),
        (typing.Literal["a"], "typing.Literal['a']"),
        (typing.Sequence[int], "typing.Sequence[int]"),
    ],
)
def test_an_unsupported_annotation_is_refused(annotation: Any, shown: str) -> None:
    """Anything not on the list (Any, unions of two types, str/int subclasses...) is refused."""
    with pytest.raises(ConfigurationError) as info:
        converter(annotation)
    message = str(info.value)
    assert "editable parameter 'value' of " in message
    assert f"is annotated {shown}" in message.replace(f"{__name__}.", "")


@pytest.mark.parametrize(
    ("annotation", "piece"),
    [
        (list[Any], "typing.Any"),
        (dict[str, Any], "typing.Any"),
        (Optional[list[Code]], f"{__name__}.Code"),  # noqa: UP045
    ],
)
def test_an_unsupported_annotation_inside_another_is_named(annotation: Any, piece: str) -> None:
    """The message names the piece inside that is not supported."""
    with pytest.raises(ConfigurationError, match=f"and {piece} in it is not a type"):
        converter(annotation)


# -- int, float, str, bool ---------------------------------------------------


@pytest.mark.parametrize("value", [0, 5, -3, 10**100])
def test_int_takes_a_json_integer(value: int) -> None:
    """An int edit is a JSON integer."""
    got = converter(int)(value)
    assert (value, int) == (got, type(got))


@pytest.mark.parametrize("value", [True, False, 5.0, 5.5, "5", None, [5], {"v": 5}])
def test_int_refuses_anything_else(value: Any) -> None:
    """Not a bool, not an integral float, not a numeric string."""
    message = refused(converter(int), value)
    assert message.startswith("the edit of value ")


def test_int_says_an_integral_float_needs_no_decimal_point() -> None:
    """5.0 is refused with the reason, not silently truncated."""
    assert "written without a decimal point or exponent" in refused(converter(int), 5.0)


@pytest.mark.parametrize(
    ("value", "expected"), [(1.5, 1.5), (5, 5.0), (2**53, 2.0**53), (-0.0, -0.0)]
)
def test_float_takes_a_number(value: Any, expected: float) -> None:
    """A float edit is a finite number; an int becomes the float it exactly is."""
    got = converter(float)(value)
    assert (repr(expected), float) == (repr(got), type(got))


@pytest.mark.parametrize("value", [2**53 + 1, 9007199254740993, 10**400, -(10**400)])
def test_float_refuses_an_int_it_cannot_hold_exactly(value: int) -> None:
    """An int that rounds (or overflows) as a float is refused."""
    assert "an integer that a float cannot hold exactly" in refused(converter(float), value)


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity"])
def test_float_refuses_what_json_loads_decodes_as_not_finite(text: str) -> None:
    """json.loads accepts NaN and Infinity; the converter does not."""
    assert "not finite" in refused(converter(float), json.loads(text))


@pytest.mark.parametrize("value", [True, "1.5", None, [1.5]])
def test_float_refuses_anything_else(value: Any) -> None:
    """A bool is not a number; nor is a numeric string."""
    refused(converter(float), value)


def test_str_takes_a_string_only() -> None:
    """str is a JSON string, nothing else."""
    convert = converter(str)
    assert ("", "x") == (convert(""), convert("x"))
    for value in (1, None, True, ["x"], {"x": "y"}):
        assert "must be a JSON string" in refused(convert, value)


def test_bool_takes_true_or_false_only() -> None:
    """bool is true or false: not 1, not "true"."""
    convert = converter(bool)
    assert (True, False) == (convert(True), convert(False))
    for value in (1, 0, "true", None):
        assert "must be true or false" in refused(convert, value)


# -- Decimal -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("12.50", "12.50"),
        ("-0", "-0"),
        ("1E+3", "1E+3"),
        ("1e3", "1E+3"),
        (".5", "0.5"),
        ("+7", "7"),
        ("1e-7", "1E-7"),
        (7, "7"),
        (10**50, "1" + "0" * 50),
        (0.1, "0.1"),
        (12.5, "12.5"),
        (1e22, "1E+22"),
        (-0.0, "-0.0"),
        (123456789012345.0, "123456789012345.0"),
        (0.000123456789012345, "0.000123456789012345"),
    ],
)
def test_decimal_takes_text_ints_and_short_floats_exactly(value: Any, expected: str) -> None:
    """Decimal text is taken exactly; an int exactly; a float of <=15 digits as its repr."""
    got = converter(Decimal)(value)
    assert (expected, Decimal) == (str(got), type(got))


@pytest.mark.parametrize(
    "value", [0.30000000000000004, 0.1 + 0.2, 1.2345678901234567, 1234567890123456.0]
)
def test_decimal_refuses_a_float_of_more_than_15_digits(value: float) -> None:
    """Its Decimal would be a guess at rounding: the reviewer is asked for a string."""
    assert "write it as a string" in refused(converter(Decimal), value)


@pytest.mark.parametrize(
    "value",
    [
        "NaN", "nan", "sNaN", "Infinity", "-Infinity", "inf",
        " 1", "1 ", "1_000", "", "1,5", "0x10", "1.2.3", "e5",
        "\u0661\u0662",  # Arabic-Indic digits: Decimal() reads them as 12
        "\uff11",  # a fullwidth 1
    ],
)  # fmt: skip
def test_decimal_refuses_text_that_is_not_a_plain_finite_number(value: str) -> None:
    """No NaN or Infinity, nothing stripped, no underscores, ASCII digits only."""
    assert "must be a finite decimal number" in refused(converter(Decimal), value)


def test_decimal_refuses_an_exponent_out_of_range() -> None:
    """An exponent Decimal cannot hold is an EditError, not decimal.InvalidOperation."""
    assert "out of range" in refused(converter(Decimal), "1e99999999999999999999")


@pytest.mark.parametrize("value", [True, None, ["1"], {"v": "1"}])
def test_decimal_refuses_other_json_types(value: Any) -> None:
    """A bool is not a number."""
    refused(converter(Decimal), value)


# -- datetime, date, UUID ----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-01-02T03:04:05+00:00", dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)),
        ("2024-01-02T03:04:05Z", dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=tzutc())),
        ("2024-01-02T03:04:05.123456", dt.datetime(2024, 1, 2, 3, 4, 5, 123456)),
        ("2024-01-02T03:04:05+05:30", dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone(
            dt.timedelta(hours=5, minutes=30)))),
        ("2024-01-02", dt.datetime(2024, 1, 2)),
    ],
)  # fmt: skip
def test_datetime_takes_iso_8601_text(text: str, expected: dt.datetime) -> None:
    """A datetime edit is ISO 8601 text, as dateutil's isoparse reads it."""
    got = converter(dt.datetime)(text)
    assert (expected, expected.utcoffset()) == (got, got.utcoffset())


@pytest.mark.parametrize(
    "value",
    ["yesterday", "2024-13-01T00:00", "2024-01-02T25:00", "", "\u0662024-01-02T00:00",
     "2024-01-02T00:00:00" + "0" * 50, 20240102, None],
)  # fmt: skip
def test_datetime_refuses_anything_else(value: Any) -> None:
    """Not ISO 8601 text (or longer than 64 characters): refused."""
    refused(converter(dt.datetime), value)


def test_datetime_says_a_long_text_is_too_long() -> None:
    """The length bound comes before the parser."""
    assert "longer than 64 characters" in refused(converter(dt.datetime), "2" * 65)


def test_date_takes_yyyy_mm_dd() -> None:
    """A date edit is exactly YYYY-MM-DD, and gives a date, not a datetime."""
    got = converter(dt.date)("2024-02-29")
    assert (dt.date(2024, 2, 29), dt.date) == (got, type(got))


@pytest.mark.parametrize(
    "value",
    ["2024-02-30", "2024-01-02T00:00:00", "2024-01-02 00:00", "20240102", "2024-1-2",
     "+2024-01-02", "2024-W01-1", "\u0662\u0660\u0662\u0664-01-02", " 2024-01-02", 20240102, None],
)  # fmt: skip
def test_date_refuses_anything_else(value: Any) -> None:
    """Not a datetime's text, not another ISO form, not a non-existent day."""
    refused(converter(dt.date), value)


@pytest.mark.parametrize(
    "text",
    ["12345678-1234-5678-1234-567812345678", "12345678-1234-5678-1234-567812345678".upper(),
     "{12345678-1234-5678-1234-567812345678}", "12345678123456781234567812345678"],
)  # fmt: skip
def test_uuid_takes_what_uuid_accepts(text: str) -> None:
    """A UUID edit is text uuid.UUID() reads."""
    assert uuid.UUID("12345678-1234-5678-1234-567812345678") == converter(uuid.UUID)(text)


@pytest.mark.parametrize(
    "value", ["not-a-uuid", "1234", "urn:uuid:" + "1" * 60, 12345678123456781234567812345678, None]
)
def test_uuid_refuses_anything_else(value: Any) -> None:
    """Not a UUID's text (or longer than 64 characters): refused."""
    refused(converter(uuid.UUID), value)


# -- Enum --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotation", "value", "expected"),
    [
        (Currency, "USD", Currency.USD),
        (Level, 2, Level.HIGH),
        (Level, 2.0, Level.HIGH),  # the same JSON number
        (Switch, False, Switch.OFF),
        (Mixed, 1, Mixed.NUMBER),
        (Mixed, "1", Mixed.TEXT),
        (Mixed, [1, 2], Mixed.PAIR),
        (Mixed, "1.50", Mixed.PRICE),
        (Odd, "ok", Odd.OK),
    ],
)
def test_enum_takes_the_member_whose_json_value_is_the_edit(
    annotation: Any, value: Any, expected: enum.Enum
) -> None:
    """The member whose value, made JSON as the request shows it, is the edit."""
    assert expected is converter(annotation)(value)


@pytest.mark.parametrize(
    ("annotation", "value"),
    [
        (Currency, "GBP"),
        (Currency, "eur"),
        (Currency, "EUR "),
        (Level, True),  # true is not 1
        (Switch, 1),  # 1 is not true
        (Mixed, "1.5"),  # not the Decimal's exact text
        (Mixed, [1, 2, 3]),
        (Twin, [1, 2]),  # two members have this JSON value: which one is a guess
        (Currency, None),
    ],
)
def test_enum_refuses_a_value_of_no_member_or_of_two(annotation: Any, value: Any) -> None:
    """Type-strict, exact; and the message lists no members."""
    message = refused(converter(annotation), value)
    assert "is not the value of exactly one member of" in message
    for member in annotation:
        assert str(member.value) not in message.replace(annotation.__qualname__, "")


# -- containers --------------------------------------------------------------


def test_list_of_converts_each_item() -> None:
    """list[X]: a JSON array, each item converted."""
    assert [Decimal("1.5"), Decimal(2)] == converter(list[Decimal])(["1.5", 2])
    assert [] == converter(list[int])([])
    assert [1, 2] == converter(typing.List[int])([1, 2])  # noqa: UP006


def test_list_of_names_the_item_that_does_not_convert() -> None:
    """The message says which item, by index."""
    assert "the edit of value[1] must be a JSON integer" in refused(converter(list[int]), [1, "2"])


def test_tuple_of_gives_a_tuple() -> None:
    """tuple[X, ...]: a JSON array, the tool gets a tuple."""
    got = converter(tuple[int, ...])([1, 2])
    assert ((1, 2), tuple) == (got, type(got))


@pytest.mark.parametrize("annotation", [list[int], tuple[int, ...]])
def test_a_sequence_refuses_what_is_not_an_array(annotation: Any) -> None:
    """An object or a string is not an array."""
    convert = converter(annotation)
    assert "must be a JSON array, not a JSON object" in refused(convert, {"0": 1})
    assert "must be a JSON array, not a JSON string" in refused(convert, "12")


def test_dict_of_converts_each_value() -> None:
    """dict[str, X]: a JSON object, each value converted, keys kept."""
    edit = {"a": "1.5", "b": 2}
    assert {"a": Decimal("1.5"), "b": Decimal(2)} == converter(dict[str, Decimal])(edit)
    assert {"a": "1.5", "b": 2} == edit  # the edit itself is not changed


def test_dict_of_names_the_key_that_does_not_convert() -> None:
    """The message says which key, cut short if long."""
    convert = converter(dict[str, int])
    assert "the edit of value['a'] must be a JSON integer" in refused(convert, {"a": "x"})
    long_key = "k" * 30 + "SECRET"
    message = refused(convert, {long_key: "x"})
    assert "SECRET" not in message
    assert "value['kkkkkkkkkkkkkkkkkkkk...']" in message
    assert "must be a JSON object, not a JSON array" in refused(convert, [])


def test_nested_list_of_dict_of_decimal() -> None:
    """list[dict[str, Decimal]] converts at every level, and names the deep item."""
    convert = converter(list[dict[str, Decimal]])
    assert [{"p": Decimal("1.10")}, {}] == convert([{"p": "1.10"}, {}])
    message = refused(convert, [{"p": "1"}, {"p": 0.30000000000000004}])
    assert "the edit of value[1]['p'] is a number with more than 15 significant digits" in message


@pytest.mark.parametrize(
    ("annotation", "value"),
    [
        (list, [1, "a", None, [True, {"k": 1.5}]]),
        (typing.List, [1]),  # noqa: UP006
        (dict, {"a": [1, {"b": None}], "c": "d"}),
        (typing.Dict, {"a": 1}),  # noqa: UP006
    ],
)
def test_bare_list_and_dict_pass_plain_json_through_as_a_copy(annotation: Any, value: Any) -> None:
    """A bare list or dict gets the JSON itself, deep-copied so the edit is not shared."""
    got = converter(annotation)(value)
    assert value == got
    assert got is not value
    inner = value[-1] if isinstance(value, list) else value["a"]
    copied = got[-1] if isinstance(got, list) else got["a"]
    if isinstance(inner, (list, dict)):
        assert copied is not inner


def test_bare_list_and_dict_refuse_the_other() -> None:
    """A bare list wants an array, a bare dict an object."""
    assert "must be a JSON array, not a JSON object" in refused(converter(list), {})
    assert "must be a JSON object, not a JSON array" in refused(converter(dict), [])


# -- Optional, Annotated -----------------------------------------------------


@pytest.mark.parametrize(
    "annotation",
    [Optional[int], int | None, Union[None, int], Annotated[Optional[int], "x"]],  # noqa: UP007, UP045
)
def test_optional_takes_null_or_the_type(annotation: Any) -> None:
    """Optional[X] and X | None: null is None, anything else X's rule."""
    convert = converter(annotation)
    assert (None, 5) == (convert(None), convert(5))
    assert "must be a JSON integer, not a JSON string" in refused(convert, "5")


def test_a_type_that_is_not_optional_refuses_null() -> None:
    """Without Optional, null is refused."""
    assert "must be a JSON integer, not null" in refused(converter(int), None)


def test_annotated_is_unwrapped() -> None:
    """Annotated[X, ...] converts as X."""
    assert Decimal("9.99") == converter(Annotated[Decimal, "money", 1])("9.99")
    assert [Currency.EUR] == converter(list[Annotated[Currency, "c"]])(["EUR"])


# -- refused at any depth ----------------------------------------------------


@pytest.mark.parametrize(
    ("annotation", "value"),
    [
        (dict, {"$redacted": "1a2b3c4d5e6f"}),
        (list, [1, [{"x": {"$redacted": "1a2b3c4d5e6f"}}]]),
        (dict[str, dict[str, int]], {"a": {"$redacted": "1a2b3c4d5e6f"}}),
        (str, {"$redacted": "1a2b3c4d5e6f"}),
        (Optional[dict], {"$redacted": None}),  # noqa: UP045
        (Mixed, {"$redacted": 1}),
    ],
)
def test_a_redaction_marker_is_never_an_edited_value(annotation: Any, value: Any) -> None:
    """A {"$redacted": ...} object anywhere in the edit is refused, whatever the type."""
    assert "holds a redaction marker ('$redacted')" in refused(converter(annotation), value)


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def test_nesting_up_to_the_request_bound_is_accepted_and_deeper_is_refused() -> None:
    """MAX_DEPTH containers are fine (as in a request); one more is an EditError."""
    convert = converter(list)
    assert nested(MAX_DEPTH) == convert(nested(MAX_DEPTH))
    assert f"nested more than {MAX_DEPTH} levels deep" in refused(convert, nested(MAX_DEPTH + 1))
    # The same bound as the request's own arguments.
    to_json_value(nested(MAX_DEPTH))
    with pytest.raises(ArgumentSerializationError):
        to_json_value(nested(MAX_DEPTH + 1))


@pytest.mark.parametrize("annotation", [list, list[int] | None, int, dict[str, int]])
def test_very_deep_nesting_is_an_edit_error_not_a_recursion_error(annotation: Any) -> None:
    """10,000 levels (past the recursion limit): an EditError, before any recursion."""
    assert "levels deep" in refused(converter(annotation), nested(10_000))


@pytest.mark.parametrize(
    "value",
    [
        (1, 2),
        {1, 2},
        Decimal("1"),
        object(),
        [float("nan")],
        {"a": float("inf")},
        {1: "a"},
        ["\ud800"],
        {"\udfff": 1},
        [10**5000],
    ],
)
def test_what_json_loads_cannot_give_is_refused_for_a_bare_container(value: Any) -> None:
    """Fail closed: non-JSON types, non-finite numbers, non-string keys, lone surrogates."""
    annotation = dict if isinstance(value, dict) else list
    refused(converter(annotation), value)


def test_a_lone_surrogate_in_a_string_is_refused() -> None:
    """Such a string cannot be sent as UTF-8, so it is no edit."""
    assert "not valid Unicode" in refused(converter(str), "a\ud800b")


@pytest.mark.parametrize(
    "annotation", [int, float, bool, Decimal, dt.datetime, dt.date, uuid.UUID, Currency, list[int]]
)
def test_a_message_never_holds_the_value_text(annotation: Any) -> None:
    """Whatever the type, the refused value's text is not in the message."""
    secret = "SECRET-" + "x" * 100
    for value in (secret, [secret], {"k": secret}):
        message = refused(converter(annotation), value)
        assert "SECRET" not in message
        assert len(message) < 200


# -- exact numbers (the package's load_json keeps what a float would round) --


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0.10000000000000000001", "0.10000000000000000001"),
        ("1E5", "1E+5"),
        ("-0", "-0"),
        ("1e400", "1E+400"),
        ("-0.0000", "-0.0000"),
    ],
)
def test_decimal_takes_an_exact_number_exactly(text: str, expected: str) -> None:
    """A JSONNumber (a number json.loads would round) is the Decimal of its text."""
    edit = load_json(text)
    assert isinstance(edit, JSONNumber)
    assert expected == str(converter(Decimal)(edit))


@pytest.mark.parametrize(("text", "expected"), [("1E5", 100000.0), ("-0", -0.0)])
def test_float_takes_an_exact_number_it_holds_exactly(text: str, expected: float) -> None:
    """1E5 is exactly 100000.0; -0 is -0.0."""
    got = converter(float)(load_json(text))
    assert (repr(expected), float) == (repr(got), type(got))


@pytest.mark.parametrize(
    "text", ["0.10000000000000000001", "1e400", "1e-400", "9007199254740993.0"]
)
def test_float_refuses_an_exact_number_it_would_round(text: str) -> None:
    """A number a float cannot hold exactly (or at all) is refused, not rounded."""
    edit = load_json(text)
    assert isinstance(edit, JSONNumber)
    assert "a float cannot hold exactly" in refused(converter(float), edit)


def test_int_takes_an_exact_integer_and_refuses_other_notation() -> None:
    """-0 and a 700-digit integer are ints; 1E5 is not written as an integer."""
    convert = converter(int)
    big = "9" * 700
    assert (0, int(big)) == (convert(load_json("-0")), convert(load_json(big)))
    assert "written without a decimal point" in refused(convert, load_json("1E5"))
    assert "too long to read" in refused(convert, JSONNumber("9" * 5000))


@pytest.mark.parametrize("value", [JSONNumber("NaN"), JSONNumber(" 1"), JSONNumber("1_0")])
def test_a_hand_made_exact_number_is_checked_again(value: JSONNumber) -> None:
    """A JSONNumber's text is not trusted: NaN or spaces are refused."""
    assert "must be a finite decimal number" in refused(converter(Decimal), value)


@pytest.mark.parametrize(
    ("annotation", "edit"),
    [(list, load_json("[1, 1E5]")), (dict, load_json('{"a": -0}')), (str, JSONNumber("1"))],
)
def test_an_exact_number_is_refused_where_no_number_type_is_named(
    annotation: Any, edit: Any
) -> None:
    """Free-form JSON (or a str) has no type to say which number an exact one becomes."""
    refused(converter(annotation), edit)


# -- round trip --------------------------------------------------------------


ROUND_TRIP = [
    (int, st.integers()),
    (float, st.floats(allow_nan=False, allow_infinity=False)),
    (str, st.text()),
    (bool, st.booleans()),
    (Decimal, st.decimals(allow_nan=False, allow_infinity=False)),
    (uuid.UUID, st.uuids()),
    (dt.date, st.dates()),
    (dt.datetime, st.datetimes()),
    (dt.datetime, st.datetimes(timezones=st.just(dt.timezone.utc))),
    (Currency, st.sampled_from(Currency)),
    (Mixed, st.sampled_from(Mixed)),
    (list[Decimal], st.lists(st.decimals(allow_nan=False, allow_infinity=False), max_size=5)),
    (dict[str, int], st.dictionaries(st.text(max_size=5), st.integers(), max_size=5)),
]


@pytest.mark.parametrize(
    ("annotation", "values"), ROUND_TRIP, ids=[str(a).replace("<class ", "") for a, _ in ROUND_TRIP]
)
def test_converting_a_value_s_request_json_gives_the_value_back(
    annotation: Any, values: st.SearchStrategy[Any]
) -> None:
    """For x of the annotated type, convert(json.loads(dumps(to_json_value(x)))) is x."""
    convert = converter(annotation)

    @settings(max_examples=60, deadline=None)
    @given(values)
    def check(value: Any) -> None:
        edit = json.loads(json.dumps(to_json_value(value)))
        got = convert(edit)
        assert value == got
        assert type(value) is type(got)
        # Equal is not enough for Decimal ("1.0" == "1.00") or floats (0.0 == -0.0).
        assert to_json_value(value) == to_json_value(got)
        assert repr(value) == repr(got) or isinstance(value, dt.datetime)

    check()
