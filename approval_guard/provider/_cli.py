"""The command's old address, kept so that a console script installed before the move still runs.

``approval-guard`` now lives in :mod:`approval_guard.cli`; an editable install
made before that still names ``approval_guard.provider._cli:main``.
"""

from approval_guard.cli import main

__all__ = ["main"]
