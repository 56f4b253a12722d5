"""approval_guard.crewai: a Crew's own agent loop with a scripted LLM, every form and outcome."""

from __future__ import annotations

import os
from typing import Any

import pytest

# CrewAI reads these when it starts: no telemetry, no tracing prompt, offline.
os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")
os.environ.setdefault("CREWAI_TESTING", "true")

from tests.support.frameworks import require_framework

require_framework("crewai")

from crewai.tools import BaseTool, tool  # noqa: E402

import approval_guard as ag  # noqa: E402
from approval_guard import crewai as ag_crewai  # noqa: E402
from approval_guard.testing import LocalProvider, deny_after  # noqa: E402
from tests.support.crewai_llm import ScriptedLLM, run_crew  # noqa: E402

ARGS = {"payment_id": "p_1", "amount": 4900}


@pytest.fixture(autouse=True)
def crewai_home(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """CrewAI keeps a user file under XDG_DATA_HOME: the test's own folder, not the home."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))


def _tool_result(guard: ag.Guard, ran: list[Any]) -> Any:
    @tool("Issue refund")
    def issue_refund(payment_id: str, amount: int) -> str:
        """Refund part of a payment; amount is in minor units."""
        ran.append((payment_id, amount))
        return f"refunded {amount} of {payment_id}"

    return ag_crewai.guarded(issue_refund, guard, timeout="1m", editable=("amount",))


def _base_tool(guard: ag.Guard, ran: list[Any]) -> Any:
    class IssueRefund(BaseTool):
        name: str = "Issue refund"
        description: str = "Refund part of a payment; amount is in minor units."

        def _run(self, payment_id: str, amount: int) -> str:
            ran.append((payment_id, amount))
            return f"refunded {amount} of {payment_id}"

    return ag_crewai.guarded(IssueRefund(), guard, timeout="1m", editable=("amount",))


def _stacked(guard: ag.Guard, ran: list[Any]) -> Any:
    @tool("Issue refund")
    @guard.requires_approval(
        tool="Issue refund", timeout="1m", editable=("amount",), on_not_run=str
    )
    def issue_refund(payment_id: str, amount: int) -> str:
        """Refund part of a payment; amount is in minor units."""
        ran.append((payment_id, amount))
        return f"refunded {amount} of {payment_id}"

    return issue_refund


FORMS = {"guarded(@tool)": _tool_result, "guarded(BaseTool)": _base_tool, "stacked": _stacked}


@pytest.fixture(params=list(FORMS.values()), ids=list(FORMS))
def form(request: pytest.FixtureRequest) -> Any:
    """Each way to guard a CrewAI tool."""
    return request.param


def _crew_turn(guard: ag.Guard, form: Any) -> tuple[list[Any], ScriptedLLM, str]:
    ran: list[Any] = []
    llm = ScriptedLLM("Issue refund", dict(ARGS))
    answer = run_crew(llm, [form(guard, ran)])
    return ran, llm, answer


def test_approved_edit_runs_once_with_the_edited_amount(
    provider: LocalProvider, guard: ag.Guard, form: Any
) -> None:
    """The reviewer's edit, converted to int, is what the tool runs with, once."""
    provider.policy = _edit_amount
    ran, llm, _ = _crew_turn(guard, form)
    assert [("p_1", 100)] == ran
    assert ["refunded 100 of p_1"] == llm.observed
    [request] = provider.requests()
    assert (ARGS, ("amount",), "Issue refund") == (
        request.arguments,
        request.editable,
        request.tool,
    )


def _edit_amount(provider: LocalProvider, request: Any) -> None:
    provider.approve(request.id, arguments={**request.arguments, "amount": 100})


def _expired(provider: LocalProvider, request: Any) -> None:
    provider.approve(request.id, valid_for=0)


def _cancel(provider: LocalProvider, request: Any) -> None:
    provider.cancel(request.id, "withdrawn")


OUTCOMES = {
    "denied": (deny_after(0.05, "over the limit"), "A person denied this call to Issue refund"),
    "expired": (_expired, "The approval for Issue refund expired"),
    "cancelled": (_cancel, "was cancelled at the provider"),
    "no decision": (None, "Issue refund did not run; it was not denied"),
}


@pytest.mark.parametrize(("policy", "sentence"), OUTCOMES.values(), ids=OUTCOMES.keys())
def test_every_other_outcome_skips_the_tool_and_tells_the_model(
    provider: LocalProvider, form: Any, policy: Any, sentence: str
) -> None:
    """Denial, expiry, cancellation, no decision: not run; the observation is the sentence."""
    provider.policy = policy
    guard = ag.Guard(
        base_url=provider.url,
        credential=provider.credential,
        harness_limit="3s",
        poll_wait="1s",
        return_margin="1s",
        deadline_margin="1s",
    )
    ran, llm, answer = _crew_turn(guard, form)
    guard.close()
    assert [] == ran
    [observed] = llm.observed
    assert sentence in observed
    assert sentence in answer


def test_the_schema_the_model_sees_is_unchanged(guard: ag.Guard) -> None:
    """guarded() keeps the tool's name, description and args_schema; the original is untouched."""

    @tool("Issue refund")
    def issue_refund(payment_id: str, amount: int) -> str:
        """Refund part of a payment."""
        return "refunded"

    copy = ag_crewai.guarded(issue_refund, guard)
    assert (issue_refund.name, issue_refund.description) == (copy.name, copy.description)
    assert issue_refund.args_schema.model_json_schema() == copy.args_schema.model_json_schema()
    assert getattr(issue_refund.func, "__approval_guard__", None) is None


@pytest.mark.parametrize(
    "make",
    [
        lambda g: ag_crewai.guarded(lambda: None, g),
        lambda g: ag_crewai.guarded(_tool_result(g, []), g),
        lambda g: ag_crewai.guarded(_plain(), g, timeout="0s"),
        lambda g: ag_crewai.guarded(_plain(), g, editable=("nope",)),
        lambda g: ag_crewai.guarded(_plain(), g, tool=""),
    ],
    ids=["not-a-tool", "already-guarded", "timeout", "editable", "empty-name"],
)
def test_bad_options_raise_when_the_tool_is_guarded(guard: ag.Guard, make: Any) -> None:
    """A bad tool or option raises at guarded(), not on the first run."""
    with pytest.raises((ag.ConfigurationError, TypeError)):
        make(guard)


def _plain() -> Any:
    @tool("Issue refund")
    def issue_refund(payment_id: str, amount: int) -> str:
        """Refund part of a payment."""
        return "refunded"

    return issue_refund
