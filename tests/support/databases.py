"""A database several provider instances share, whichever backend: the ``shared_db`` fixture's."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from approval_guard.provider.store.opening import open_store
from approval_guard.provider.store.protocol import StoreProtocol


@attrs.frozen
class SharedDatabase:
    """One database several provider instances open: a SQLite file or a PostgreSQL schema."""

    kind: str
    #: The SQLite file, or the PostgreSQL DSN (its tables in a schema of their own).
    where: str

    def open(self, **options: Any) -> StoreProtocol:
        """One more store (an instance) on the database."""
        if self.kind == "postgres":
            return open_store(dsn=self.where, **options)
        return open_store(db=self.where, **options)


#: For a test of what only PostgreSQL does (LISTEN/NOTIFY, its own limits): ``shared_db``
#: on PostgreSQL alone.
only_postgres = pytest.mark.parametrize(
    "shared_db", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
