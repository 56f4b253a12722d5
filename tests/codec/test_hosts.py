"""The one loopback check: localhost, 127.0.0.0/8 and ::1 (bracketed or not, v4-mapped too)."""

from __future__ import annotations

import pytest

from approval_guard._codec.hosts import is_loopback, listen_host, unbracket


@pytest.mark.parametrize(
    "host",
    [
        "localhost",
        "LocalHost",
        "localhost.",
        "127.0.0.1",
        "127.255.0.9",
        "::1",
        "[::1]",
        "0:0:0:0:0:0:0:1",
        "[0:0:0:0:0:0:0:1]",
        "::1%lo",
        "::ffff:127.0.0.1",
        "[::ffff:127.0.0.1]",
        "[::ffff:7f00:2]",
    ],
)
def test_addresses_only_this_machine_reaches_are_loopback(host: str) -> None:
    """localhost, 127.0.0.0/8, ::1 with or without a URL's brackets, and ::ffff:127.x.x.x."""
    assert is_loopback(host)


@pytest.mark.parametrize(
    "host",
    [
        "",
        "0.0.0.0",
        "::",
        "[::]",
        "10.0.0.1",
        "::ffff:10.0.0.1",
        "[::ffff:10.0.0.1]",
        "128.0.0.1",
        "127.1",  # inet_aton's short form: not an address ipaddress accepts, so not trusted
        " 127.0.0.1",
        "[127.0.0.1]",  # brackets are for IPv6 only
        "[[::1]]",
        "[::1",
        "::1]",
        "localhost.example.com",
        "evil.localhost",
        "example.com",
    ],
)
def test_anything_else_is_not_loopback(host: str) -> None:
    """Other addresses, names (nothing is looked up) and malformed hosts: not loopback."""
    assert not is_loopback(host)


@pytest.mark.parametrize(
    ("host", "bare"),
    [
        ("[::1]", "::1"),
        ("::1", "::1"),
        ("[fe80::1%eth0]", "fe80::1%eth0"),
        ("127.0.0.1", "127.0.0.1"),
        ("[127.0.0.1]", "[127.0.0.1]"),
        ("[example.com]", "[example.com]"),
        ("[]", "[]"),
        ("localhost", "localhost"),
    ],
)
def test_unbracket_takes_a_urls_brackets_off_an_ipv6_address_only(host: str, bare: str) -> None:
    """[::1] -> ::1; brackets around anything else are kept (so it stays invalid)."""
    assert bare == unbracket(host)


@pytest.mark.parametrize(
    ("host", "bound"),
    [
        ("[::1]", "::1"),
        ("::1", "::1"),
        ("[::ffff:127.0.0.1]", "127.0.0.1"),
        ("::ffff:7f00:2", "127.0.0.2"),
        ("127.0.0.1", "127.0.0.1"),
        ("0.0.0.0", "0.0.0.0"),
        ("localhost", "localhost"),
    ],
)
def test_a_listen_host_is_the_address_it_stands_for(host: str, bound: str) -> None:
    """Brackets off, and a v4-mapped address as its IPv4 one (a v6-only socket cannot bind it)."""
    assert bound == listen_host(host)
