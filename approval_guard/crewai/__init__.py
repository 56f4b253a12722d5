"""approval_guard for CrewAI tools (the ``crewai`` extra).

``guarded(tool, guard, **options)`` is a copy of a CrewAI tool (a ``@tool``
result or any ``BaseTool``) whose every run waits for approval; a function
under ``@tool`` can also be guarded by stacking ``@guard.requires_approval``
under it. See docs/crewai.md. CrewAI is imported only when ``guarded`` is used.
"""

from __future__ import annotations

from approval_guard.crewai._tool import guarded

__all__ = ["guarded"]
