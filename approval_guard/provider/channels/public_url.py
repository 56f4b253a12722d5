"""The provider's public address (``--public-url``): checked at start, and links joined onto it.

A public URL may carry a path (``https://host/approvals``) when a reverse
proxy serves the provider under a prefix: every link a channel sends (the
review page at a request, an email's confirmation page) is that URL with the
provider's own path joined on, the prefix kept. The pages themselves write
their URLs relative to their own address, so the proxy's prefix needs no
setting in them (:func:`approval_guard.provider.http.responses.to_root`).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from approval_guard.provider.channels.webhooks.signing import check_url


def check_public_url(url: str) -> str:
    """``url`` without its trailing ``/``, if it can be the base of links; else ``ValueError``.

    An absolute http(s) URL with a host, and a path or none. A query, a
    fragment or a user name cannot be the base of a link, so they are refused
    (the message says which, and never quotes the URL).

    Args:
        url: The review page's address as people reach it (``--public-url``).
    """
    try:
        checked = check_url(url)
    except ValueError:
        raise ValueError("a public URL must be http(s)://HOST[:PORT][/PATH]") from None
    parts = urlsplit(checked)
    if parts.username is not None or parts.password is not None:
        raise ValueError("a public URL must not carry a user name or password")
    if parts.query or "?" in checked:
        raise ValueError("a public URL must not have a query (?...): links are joined onto it")
    if parts.fragment or "#" in checked:
        raise ValueError("a public URL must not have a fragment (#...): links are joined onto it")
    return checked.rstrip("/")


def public_link(base: str, path: str) -> str:
    """``path`` (from the provider's root: ``/``, ``/email/...``) joined onto ``base``.

    The base's own path is kept and no ``//`` is made: ``https://host/approvals``
    and ``/?request=ID`` give ``https://host/approvals/?request=ID``.

    Args:
        base: A public URL (or the server's own URL), with or without its trailing ``/``.
        path: The provider's path, starting with ``/``, with its query if any.
    """
    if not path.startswith("/"):
        raise ValueError(f"a provider path starts with '/', not {path!r}")
    return base.rstrip("/") + path
