"""One guarded call's logic, free of I/O: a generator of operations that a driver performs."""
