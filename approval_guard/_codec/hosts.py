"""Whether a host names this machine only: the package's one loopback check. Pure, no I/O.

A loopback host is ``localhost`` (any case, a trailing dot allowed), an IPv4
address in 127.0.0.0/8, ``::1``, or an IPv4-mapped IPv6 address of one
(``::ffff:127.0.0.1``: a dual-stack socket maps it to 127.0.0.1, on every
Python version), each as written or, for IPv6, between brackets as in a URL
(``[::1]``). Nothing is looked up: any other name is not loopback, whatever it
resolves to, and so is anything malformed, so a check that a loopback host
relaxes fails closed.
"""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback", "listen_host", "unbracket"]


def unbracket(host: str) -> str:
    """``host`` without the brackets a URL puts around an IPv6 address (``[::1]`` -> ``::1``).

    Anything else is returned as given: brackets around what is not an IPv6
    address are not a URL's, and are kept (so the host stays invalid).

    Args:
        host: A host as written in a URL or an option (``[::1]``, ``::1``, ``localhost``).
    """
    if len(host) > 2 and host[0] == "[" and host[-1] == "]":
        inner = host[1:-1]
        try:
            ipaddress.IPv6Address(inner)
        except ValueError:
            return host
        return inner
    return host


def is_loopback(host: str) -> bool:
    """True if ``host`` is reachable from this machine only (see the module's docstring).

    Args:
        host: A host name or IP address, IPv6 with or without brackets.
    """
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        address = ipaddress.ip_address(unbracket(host))
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def listen_host(host: str) -> str:
    """The address to bind for ``host`` as an option gives it, as in a URL or not.

    Brackets come off an IPv6 address (``[::1]`` -> ``::1``), and an IPv4-mapped
    one is its IPv4 address (``[::ffff:127.0.0.1]`` -> ``127.0.0.1``): the
    address it stands for, which a server binding a v6-only socket (uvicorn)
    could not bind as written. Anything else is returned as given.

    Args:
        host: A host as written in a listen option (``[::1]``, ``::1``, ``127.0.0.1``, a name).
    """
    bare = unbracket(host)
    try:
        address = ipaddress.ip_address(bare)
    except ValueError:
        return bare
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return bare
