"""Helpers for testing code that uses approval_guard: a real provider, in-process.

:class:`LocalProvider` runs the local provider on 127.0.0.1 on a free port and
lets a test play the reviewer::

    import approval_guard.testing as ag_testing

    with ag_testing.LocalProvider() as provider:
        guard = Guard(base_url=provider.url, credential=provider.credential)
        ...                                  # something creates a request
        request = provider.next_request()    # blocks until it appears
        provider.approve(request.id, note="fine")

or decides by policy, in a background thread::

    with ag_testing.LocalProvider(policy=ag_testing.approve_after(0.1)) as provider:
        ...

Fault injection (``provider.faults``) and exchange counters (``provider.stats``)
are those of a :class:`FaultProxy` in front of the server: :attr:`LocalProvider.url`
is the proxy's. The proxy works in front of any provider, your own included::

    with ag_testing.FaultProxy("http://staging-provider.internal:8080") as proxy:
        proxy.faults.add("status", on="poll", status=503, retry_after=1)

With a file ``db``, a second ``LocalProvider`` on the same file sees everything
the first stored, credentials included: to make that possible, and only for
databases a ``LocalProvider`` created credentials in, their plaintext tokens
are kept in the table ``testing_credentials``. The real ``approval-guard
serve`` never writes that table. ``stop()`` then ``start()`` simulates a
provider restart (on a file: a fresh connection to the same database, the
same port).
"""

from __future__ import annotations

from approval_guard._call.ops import Timings
from approval_guard.testing._faults import EXCHANGES, FAULT_KINDS, Fault, FaultRecord, Faults, Stats
from approval_guard.testing._local import LocalProvider
from approval_guard.testing._policies import Policy, approve_after, deny_after
from approval_guard.testing._proxy import FaultProxy

__all__ = [
    "EXCHANGES",
    "FAULT_KINDS",
    "Fault",
    "FaultProxy",
    "FaultRecord",
    "Faults",
    "LocalProvider",
    "Policy",
    "Stats",
    "Timings",
    "approve_after",
    "deny_after",
]
