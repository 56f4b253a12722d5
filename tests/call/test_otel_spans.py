"""OpenTelemetry: one ``approval_guard.call`` span per guarded call (extra ``otel``).

Checked with the SDK's in-memory span exporter, over real HTTP against the
local provider; and, in a subprocess without ``opentelemetry`` importable,
that nothing is imported and calls behave the same.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import approval_guard as ag
from approval_guard.testing import LocalProvider, approve_after, deny_after
from tests.support.guards import make_guard
from tests.support.hostile import approved, hostile_guard
from tests.support.tools import MODES, define, edit_to, refund, run

_EXPORTER = InMemorySpanExporter()
_PROVIDER = TracerProvider()
_PROVIDER.add_span_processor(SimpleSpanProcessor(_EXPORTER))
trace.set_tracer_provider(_PROVIDER)  # once per process, as the API allows


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


def only_call_span(exporter: InMemorySpanExporter) -> Any:
    calls = [s for s in exporter.get_finished_spans() if s.name == "approval_guard.call"]
    assert 1 == len(calls), [s.name for s in exporter.get_finished_spans()]
    return calls[0]


@pytest.mark.parametrize("mode", MODES)
def test_an_approved_call_is_one_span_with_its_stages(
    provider: LocalProvider, spans: InMemorySpanExporter, mode: str
) -> None:
    guard = make_guard(provider)
    tracer = trace.get_tracer("test")
    inner: list[Any] = []

    def body(payment_id: str, amount: int, currency: str = "GBP") -> int:
        with tracer.start_as_current_span("inside the tool") as child:
            inner.append(child.get_span_context())
        return amount

    provider.policy = edit_to(amount=7)
    out = run(define(guard, mode, body, editable=("amount",)), "pay_SECRET", 4900)
    assert 7 == out
    span = only_call_span(spans)
    (request,) = provider.requests()
    attrs = dict(span.attributes)
    assert "issue_refund" != attrs["approval_guard.tool"]  # the body's own name
    assert "body" == attrs["approval_guard.tool"]
    assert request.id == attrs["approval_guard.request_id"]
    assert "ran" == attrs["approval_guard.outcome"]
    assert attrs["approval_guard.seconds_waited"] > 0
    assert attrs["approval_guard.provider_request_id"]
    names = [e.name for e in span.events]
    assert names[0] == "approval_guard.request_created"
    for stage in ("decided", "arguments_edited", "tool_started", "tool_finished"):
        assert f"approval_guard.{stage}" in names
    assert StatusCode.ERROR != span.status.status_code
    # The tool's own span is a child of the call's.
    (child,) = [s for s in spans.get_finished_spans() if s.name == "inside the tool"]
    assert child.parent is not None and child.parent.span_id == span.context.span_id
    # No argument value anywhere on the span.
    dumped = json.dumps(
        [dict(span.attributes), [(e.name, dict(e.attributes or {})) for e in span.events]],
        default=str,
    )
    assert "SECRET" not in dumped and "4900" not in dumped


@pytest.mark.parametrize("mode", MODES)
def test_a_denied_call_is_not_an_error(
    provider: LocalProvider, spans: InMemorySpanExporter, mode: str
) -> None:
    guard = make_guard(provider)
    provider.policy = deny_after(0.05, "no")
    out = run(define(guard, mode, refund([])), "pay", 1)
    assert isinstance(out, ag.NotRun)
    span = only_call_span(spans)
    assert "denied" == span.attributes["approval_guard.outcome"]
    assert StatusCode.ERROR != span.status.status_code
    assert "approval_guard.call_not_run" == span.events[-1].name


@pytest.mark.parametrize("mode", MODES)
def test_only_the_tools_own_exception_makes_the_span_an_error(
    provider: LocalProvider, spans: InMemorySpanExporter, mode: str
) -> None:
    guard = make_guard(provider)

    def body(x: int) -> int:
        raise ValueError("tool broke")

    provider.policy = approve_after(0.05)
    with pytest.raises(ValueError, match="tool broke"):
        run(define(guard, mode, body), 1)
    span = only_call_span(spans)
    assert StatusCode.ERROR == span.status.status_code
    assert "raised" == span.attributes["approval_guard.outcome"]
    assert "ValueError" == span.attributes["approval_guard.error"]


@pytest.mark.parametrize("mode", MODES)
def test_a_skipped_approval_is_a_span_too(
    provider: LocalProvider, spans: InMemorySpanExporter, mode: str
) -> None:
    guard = make_guard(provider)
    assert 3 == run(define(guard, mode, lambda x: x, when=lambda a: False), 3)
    span = only_call_span(spans)
    assert "skipped" == span.attributes["approval_guard.outcome"]
    assert "approval_guard.approval_skipped" == span.events[0].name


def test_without_the_extra_nothing_is_imported_and_calls_still_run(tmp_path: Any) -> None:
    """A process where ``opentelemetry`` cannot be imported: no span, no import, same outcome."""
    script = textwrap.dedent(
        """
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "opentelemetry" or name.startswith("opentelemetry."):
                    raise ImportError("blocked")
                return None
        sys.meta_path.insert(0, Block())
        import approval_guard as ag
        from approval_guard.testing import LocalProvider, approve_after
        with LocalProvider(policy=approve_after(0.05)) as p:
            guard = ag.Guard(base_url=p.url, credential=p.credential, harness_limit="1m",
                             poll_wait="2s", return_margin="1s", deadline_margin="1s")
            @guard.requires_approval(timeout="30s")
            def tool(x: int) -> int:
                return x * 2
            assert tool(21) == 42
        assert not any(m.startswith("opentelemetry") for m in sys.modules), "imported"
        print("ok")
        """
    )
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env
    )
    assert "ok" in done.stdout, done.stderr


#: The start of a child script: spans started are counted, and a guarded tool made.
_COUNTED_TOOL = textwrap.dedent(
    """\
    started = []
    real = _otel._tracer.start_span
    def counting(*args, **kwargs):
        started.append(args[0])
        return real(*args, **kwargs)
    _otel._tracer.start_span = counting
    with LocalProvider(policy=approve_after(0.05)) as p:
        guard = ag.Guard(base_url=p.url, credential=p.credential, harness_limit="1m",
                         poll_wait="2s", return_margin="1s", deadline_margin="1s")
        @guard.requires_approval(timeout="30s")
        def tool(x: int) -> int:
            return x * 2
    """
).rstrip("\n")


def test_with_the_api_and_no_provider_set_no_span_is_started_until_one_is(
    tmp_path: Any,
) -> None:
    """API only: a call starts no span (it would be dropped); after set_tracer_provider, one."""
    script = textwrap.dedent(
        """
        import approval_guard as ag
        from approval_guard import _otel
        from approval_guard.testing import LocalProvider, approve_after
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        assert _otel.tracing()
        {_COUNTED_TOOL}
            assert tool(21) == 42
            assert [] == started, started
            exporter = InMemorySpanExporter()
            sdk = TracerProvider()
            sdk.add_span_processor(SimpleSpanProcessor(exporter))
            trace.set_tracer_provider(sdk)
            assert tool(4) == 8
            assert ["approval_guard.call"] == started, started
            assert ["approval_guard.call"] == [s.name for s in exporter.get_finished_spans()]
        print("ok")
        """
    ).replace("{_COUNTED_TOOL}", _COUNTED_TOOL)
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    env.pop("OTEL_PYTHON_TRACER_PROVIDER", None)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env
    )
    assert "ok" in done.stdout, done.stderr


def test_a_provider_named_by_the_environment_before_the_first_call_gets_its_span(
    tmp_path: Any,
) -> None:
    """OTEL_PYTHON_TRACER_PROVIDER set once the API was looked up, none in code: a span."""
    script = textwrap.dedent(
        """
        import approval_guard as ag
        from approval_guard import _otel
        from approval_guard.testing import LocalProvider, approve_after
        from opentelemetry import trace
        import os
        assert _otel.tracing()
        os.environ["OTEL_PYTHON_TRACER_PROVIDER"] = "sdk_tracer_provider"
        assert trace._TRACER_PROVIDER is None  # only the environment names one
        {_COUNTED_TOOL}
            assert tool(21) == 42
            assert ["approval_guard.call"] == started, started
        print("ok")
        """
    ).replace("{_COUNTED_TOOL}", _COUNTED_TOOL)
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    env.pop("OTEL_PYTHON_TRACER_PROVIDER", None)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env
    )
    assert "ok" in done.stdout, done.stderr


# A bug found in the review of issue 11 (when=, redact=, editable=, events).
def test_a_cancelled_tool_on_the_when_false_path_is_no_error_span(
    provider: LocalProvider, guard: ag.Guard, spans: Any
) -> None:
    """Only a tool's own exception is an ERROR span: a cancelled task is not one, skipped or not."""
    from opentelemetry.trace import StatusCode

    started = asyncio.Event()

    async def slow(amount: int) -> None:
        started.set()
        await asyncio.Event().wait()  # never done: the task is cancelled here

    tool = guard.requires_approval(when=lambda args: False)(slow)

    async def main() -> None:
        task = asyncio.ensure_future(tool(1))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    (span,) = [s for s in spans.get_finished_spans() if s.name == "approval_guard.call"]
    assert StatusCode.ERROR is not span.status.status_code
    assert "interrupted" == span.attributes["approval_guard.outcome"]


# A bug found in the review of issue 11 (when=, redact=, editable=, events).
@pytest.mark.parametrize("mode", MODES)
def test_a_call_that_raises_before_it_is_planned_still_ends_its_span(
    provider: LocalProvider, guard: ag.Guard, mode: str, spans: Any
) -> None:
    """Arguments that cannot be sent raise, as documented, and the call's span is still ended."""
    tool = define(guard, mode, refund([]))
    with pytest.raises(ag.ArgumentSerializationError):
        run(tool, object(), 1)
    (span,) = [s for s in spans.get_finished_spans() if s.name == "approval_guard.call"]
    assert "raised" == span.attributes["approval_guard.outcome"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("decision", "expected"),
    [
        (
            {"decided_by": "alice", "grant": {"id": "grant-7", "granted_by": ["alice", "bob"]}},
            {"approval_guard.grant_id": "grant-7", "approval_guard.granted_by": "alice, bob"},
        ),
        ({"decided_by": "rule:small refunds"}, {"approval_guard.rule": "small refunds"}),
    ],
)
def test_a_call_decided_by_a_grant_or_a_rule_names_it_on_its_span(
    hostile: Any,
    spans: InMemorySpanExporter,
    mode: str,
    decision: dict[str, Any],
    expected: dict[str, str],
) -> None:
    """API 1.3: the span and its ``decided`` event say which grant (and whose) or which rule."""
    p = hostile(create=lambda r, _: (201, approved(r, **decision)))
    out = run(define(hostile_guard(p), mode, refund([])), "p_1", 49)
    assert {"refunded": 49, "currency": "GBP"} == out
    span = only_call_span(spans)
    attrs = dict(span.attributes)
    (event,) = [e for e in span.events if e.name == "approval_guard.decided"]
    for key, value in expected.items():
        assert value == attrs[key]
        assert value == event.attributes[key]
    others = {"approval_guard.grant_id", "approval_guard.granted_by", "approval_guard.rule"}
    assert not (others - set(expected)) & set(attrs)
