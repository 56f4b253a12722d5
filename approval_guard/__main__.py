"""``python -m approval_guard``: the same command as ``approval-guard``."""

from approval_guard.provider._cli import main

if __name__ == "__main__":
    raise SystemExit(main())
