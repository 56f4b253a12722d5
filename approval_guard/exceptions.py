"""The public error tree. Exceptions are for misuse; a call that did not run is a value.

::

    Exception
     +-- ApprovalGuardError                 base of everything raised on purpose here
          +-- ConfigurationError (ValueError)   a bad option; raised when Guard/decorator is made
          +-- ArgumentSerializationError (TypeError)
          |                                  an argument that cannot be made JSON; nothing sent
          +-- LedgerError                      the execution record could not be read or written

A tool's own exception propagates unchanged.
"""

from __future__ import annotations


class ApprovalGuardError(Exception):
    """Base class of the errors approval_guard raises on purpose."""


class ConfigurationError(ApprovalGuardError, ValueError):
    """A bad option (duration, URL, credential...). Raised when the object is created."""


class ArgumentSerializationError(ApprovalGuardError, TypeError):
    """A call argument that cannot be made JSON. Raised before anything is sent."""


class LedgerError(ApprovalGuardError):
    """The execution record could not be reached or written.

    When it happens while claiming a request, the tool does not run.
    """
