"""What one batched wait (API 1.2) may list, and what its answer says about each id.

Pure parts of :mod:`approval_guard._transport.async_wait`: the API's limits and
this client's timings, how many ids fit in one batch, and the strict reading of
a batch's body into answers to hand on and ids to poll alone.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import attrs

from approval_guard._codec.wire_models import parse_request

log = logging.getLogger("approval_guard")

#: Ids one batched wait lists at most (the API's limit).
MAX_IDS = 1000
#: The longest id a batched wait lists (the API's limit); a longer one is polled alone.
MAX_ID = 200
#: Batched waits in flight on one loop at most; calls beyond their room poll alone.
MAX_BATCHES = 32
#: How long each batched wait asks the provider to hold it (seconds).
BATCH_WAIT = 30
#: A batch's hard deadline outlasts its wait by this much.
READ_SLACK = 5.0
#: With every batch in flight, new ids are gathered this long before one is cut short.
MERGE_DELAY = 0.02
#: An answer sooner than this that moved no call on is "at once": the next one waits.
EARLY = 1.0
#: The pauses after answers at once with nothing: doubling from the first to the last.
PAUSE_FIRST, PAUSE_LAST = 0.25, 5.0
#: News of a request whose call was between two polls is kept this long for its next poll.
LINGER = 10.0
#: How often news nobody came back for is looked for and forgotten (seconds).
SWEEP = 60.0
#: Statuses saying the provider does not serve batched waits.
UNSUPPORTED = frozenset({400, 404, 405, 501})
#: The most bytes of ids one batched wait's body carries (the API keeps bodies under 64 KiB).
MAX_IDS_BYTES = 60 * 1024
#: Batched waits in a row that failed, or answered at once with nothing, before this client
#: stops asking for them (a route that stalls, or a gateway that answers for it, would
#: otherwise delay every call's news until its own poll's end).
STRIKES = 3


def fitting(kept: list[str], fresh: list[str]) -> int:
    """How many of ``fresh`` fit in one batch beside ``kept`` (by count and by body size)."""
    size = sum(len(json.dumps(rid)) + 2 for rid in kept)
    count = len(kept)
    taken = 0
    for rid in fresh:
        size += len(json.dumps(rid)) + 2
        count += 1
        if count > MAX_IDS or size > MAX_IDS_BYTES:
            break
        taken += 1
    return taken


@attrs.frozen
class BatchReading:
    """A batch's answer, read: items to hand on, ids to poll alone, and whether it said anything."""

    #: Each listed id the answer gave one well-formed item for, with that item.
    found: dict[str, dict[str, Any]]
    #: Listed ids whose item came twice, did not parse, or were reported not found.
    doubtful: frozenset[str]
    #: The answer named at least one listed id (found or not found).
    news: bool


def read_batch(ids: list[str], body: Any) -> BatchReading | None:
    """Read a batch's body strictly; ``None`` when it is not the documented shape."""
    items = body.get("requests") if isinstance(body, dict) else None
    missing = body.get("not_found", []) if isinstance(body, dict) else None
    if not isinstance(items, list) or not isinstance(missing, list):
        log.warning("a batched wait's answer is not the documented shape; polling alone")
        return None
    listed = set(ids)
    found: dict[str, dict[str, Any]] = {}
    doubtful: set[str] = set()
    for item in items:
        named = item.get("id") if isinstance(item, dict) else None
        if not isinstance(named, str) or named not in listed:
            log.warning("a batched wait answered about a request it did not list; ignored")
            continue
        if named in found:
            doubtful.add(named)
        found[named] = item
    doubtful.update(rid for rid in missing if isinstance(rid, str) and rid in listed)
    news = bool(found or doubtful)
    for rid, item in list(found.items()):
        if rid in doubtful:
            del found[rid]
            continue
        try:
            parse_request(item)
        except Exception:
            doubtful.add(rid)
            del found[rid]
    return BatchReading(found=found, doubtful=frozenset(doubtful), news=news)
