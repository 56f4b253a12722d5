"""Per-tool review rules: who may decide, how many must approve, for how long."""
