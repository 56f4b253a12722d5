"""The tests. Importing this package first of all turns bytecode caches on for the run.

pytest imports it before any conftest, in the main process and in each xdist
worker. A run starts four workers and a few hundred Python children (providers,
MCP proxies and their servers, the examples), which inherit the environment.
Where ``PYTHONDONTWRITEBYTECODE`` is set, each of them compiled the checkout
again and each worker rewrote the asserts of every test module and plugin again:
about 20 s of CPU in a default run on two cores. The caches go where Python puts
them, in ``__pycache__`` (ignored by git).
"""

import os
import sys

sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
