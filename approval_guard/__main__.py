"""``python -m approval_guard``: the same command as ``approval-guard``."""

from approval_guard.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
