"""The API reference's check: every public parameter is described (docs/hooks/params.py)."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from tests.support.paths import REPO


def load_check() -> ModuleType:
    spec = importlib.util.spec_from_file_location("params_check", REPO / "docs/hooks/params.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_public_parameter_is_described() -> None:
    """No name in the documented modules' ``__all__`` has an undescribed parameter."""
    check = load_check()
    found = []
    for module_name in check.DOCUMENTED:
        module = importlib.import_module(module_name)
        for name in check.public_names(module):
            found += check.gaps(f"{module_name}.{name}", getattr(module, name))
    assert [] == found


def test_an_undescribed_parameter_is_found() -> None:
    """A parameter the docstring's Args section leaves out is reported; a described one is not."""
    check = load_check()

    def refund(payment_id: str, amount: int) -> None:
        """Refund a payment.

        Args:
            payment_id: The payment.
        """

    assert ["refund: amount"] == list(check.gaps("refund", refund))
