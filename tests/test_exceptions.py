"""One error tree: every error the provider and the command define derives from ProviderError,
keeps the standard base it had, and is named in approval_guard.exceptions' drawn tree.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import sqlite3

import pytest

import approval_guard.cli
import approval_guard.exceptions
import approval_guard.provider
from approval_guard.exceptions import ApprovalGuardError, ProviderError


def _defined_errors() -> dict[str, type[BaseException]]:
    """Every exception class defined in a module under approval_guard.provider or .cli."""
    found: dict[str, type[BaseException]] = {}
    for package in (approval_guard.provider, approval_guard.cli):
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            module = importlib.import_module(info.name)
            for value in vars(module).values():
                if (
                    inspect.isclass(value)
                    and issubclass(value, BaseException)
                    and value.__module__ == module.__name__
                ):
                    found[f"{module.__name__}.{value.__qualname__}"] = value
    return found


ERRORS = _defined_errors()


def test_the_walk_finds_the_errors() -> None:
    """The walk sees the store's, the rules', the channels' and the command's errors."""
    names = {name.rpartition(".")[2] for name in ERRORS}
    assert {"StoreError", "RulesError", "ChannelSettingsError", "CliError", "LinkRefused"} <= names


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_every_provider_and_command_error_is_a_provider_error(name: str) -> None:
    """Each derives from ProviderError, so from ApprovalGuardError: one tree."""
    assert issubclass(ERRORS[name], ProviderError)
    assert issubclass(ERRORS[name], ApprovalGuardError)


#: The standard bases the errors had before they joined the tree: still there.
KEPT = {
    "approval_guard.provider.channels.base.ChannelSettingsError": ValueError,
    "approval_guard.provider.channels.email.addresses.AddressError": ValueError,
    "approval_guard.provider.rules.config.RulesError": ValueError,
    "approval_guard.provider.rules.scope.ScopeError": ValueError,
    "approval_guard.provider.store.models.GrantRefused": ValueError,
    "approval_guard.provider.store.models.InvalidEdit": ValueError,
    "approval_guard.provider.store.models.UnknownGrant": LookupError,
    "approval_guard.provider.store.models.UnknownRequest": LookupError,
    "approval_guard.provider.store.models.ValidityTooLong": ValueError,
    "approval_guard.provider.store.sql.credentials.ReviewerNameError": ValueError,
    "approval_guard.provider.store.sqlite_group.CommitFailed": sqlite3.DatabaseError,
    "approval_guard.provider.channels.webhooks.signing.WebhookSignatureError": ValueError,
}


@pytest.mark.parametrize(("name", "base"), sorted(KEPT.items()))
def test_an_error_keeps_the_standard_base_it_had(name: str, base: type[Exception]) -> None:
    """``except ValueError`` (or LookupError, sqlite3.Error) still catches what it caught."""
    assert issubclass(ERRORS[name], base)


def test_the_drawn_tree_names_every_public_error() -> None:
    """approval_guard.exceptions' docstring (its reference page) lists each of them."""
    tree = approval_guard.exceptions.__doc__ or ""
    drawn = set(re.findall(r"\b[A-Z][A-Za-z]+\b", tree))
    public = {error.__name__ for error in ERRORS.values() if not error.__name__.startswith("_")}
    assert set() == public - drawn
