"""The public error tree. Exceptions are for misuse; a call that did not run is a value.

::

    Exception
     +-- ApprovalGuardError                 base of everything raised on purpose here
          +-- ConfigurationError (ValueError)   a bad option; raised when Guard/decorator is made
          +-- ArgumentSerializationError (TypeError)
          |                                  an argument that cannot be made JSON; nothing sent
          +-- LedgerError                      the execution record could not be read or written
          +-- ProviderError                    the local provider's and the command's own errors
               +-- StoreError                  provider.store.models: the store refused or failed
               |    +-- IdempotencyKeyReused       the key was used before with another body
               |    +-- IdempotencyKeyInUse        the first create with the key is in flight
               |    +-- NotPendingError            the request is no longer pending
               |    +-- InvalidEdit (ValueError)   an editable list or an edit refused
               |    +-- UnknownRequest (LookupError), UnknownGrant (LookupError)
               |    +-- Forbidden, AlreadyApproved, GrantAlreadyApproved, LinkUsed
               |    +-- ValidityTooLong (ValueError), GrantRefused (ValueError)
               |    +-- StoreClosedError           the store was closed
               +-- CommitFailed                provider.store.group_commit: a write's batch
               |                               did not commit (SQLite's is also sqlite3's
               |                               DatabaseError)
               +-- RolledBack                  provider.store.pg_group: PostgreSQL rolled a
               |                               batch back (and the store's private retry
               |                               signals, caught where they are raised)
               +-- ReviewerNameError (ValueError)  provider.store.sql.credentials: a bad name
               +-- RulesError (ValueError)     provider.rules.config: a bad rules file, FILE:LINE
               +-- ScopeError (ValueError)     provider.rules.scope: a bad grant constraint
               +-- ApiError                    provider.http.responses: an HTTP error answer
               +-- ChannelSettingsError (ValueError)
               |                               provider.channels.base: a channel cannot work
               +-- WebhookSignatureError (ValueError)
               |                               provider.channels.webhooks.signing: not ours
               +-- AddressError (ValueError)   provider.channels.email.addresses: a bad address
               +-- LinkRefused                 provider.channels.links: a link that decides nothing
               +-- CliError                    cli: the approval-guard command stops (exit 1)
                    +-- UsageError             a bad command line (exit 2)

A tool's own exception propagates unchanged.

Each of the provider's errors is defined beside the code that raises it (the
tree names its module under ``approval_guard``) and keeps its other bases, so
``except ValueError`` still catches a ``RulesError``; ``except ProviderError``
catches them all. The core never imports the provider, so they are imported
from there, not from here (the public ones also from :mod:`approval_guard.provider`).
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


class ProviderError(ApprovalGuardError):
    """Base class of the errors the local provider and the ``approval-guard`` command raise.

    Every exception class defined under ``approval_guard.provider`` and
    ``approval_guard.cli`` derives from it (the tree above lists them).
    """
