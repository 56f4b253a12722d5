"""The execution record: which approved calls have started, so none runs twice."""
