"""TLS: the API over https with both files given, and ``serve`` off loopback with TLS needs
no plain-HTTP warning.
"""

from __future__ import annotations

import datetime as dt
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from approval_guard.provider import ProviderServer
from tests.support.api import REFUND
from tests.support.raw_http import first_tokens


def _self_signed(folder: Path) -> tuple[str, str]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.timezone.utc)
    import ipaddress

    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(cert_path), str(key_path)


def test_tls_serves_the_api_over_https(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    with ProviderServer(":memory:", tls_certfile=cert, tls_keyfile=key) as server:
        assert server.url.startswith("https://127.0.0.1:")
        instance, _ = first_tokens(server)
        response = requests.post(
            f"{server.url}/v1/requests",
            json={"tool": "t", "arguments": REFUND, "timeout": "30m"},
            headers={"Authorization": f"Bearer {instance}", "Idempotency-Key": "k"},
            verify=cert,
            timeout=10,
        )
        assert 201 == response.status_code, response.text
        with pytest.raises(requests.ConnectionError):  # plain HTTP is not answered
            requests.get(server.url.replace("https", "http", 1) + "/v1/events", timeout=5)


def test_tls_needs_both_files() -> None:
    with pytest.raises(ValueError, match="both"):
        ProviderServer(":memory:", tls_certfile="cert.pem")


def test_serve_off_loopback_starts_with_tls(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    db = tmp_path / "a.sqlite3"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "approval_guard",
            "serve",
            "--db",
            str(db),
            "--host",
            "0.0.0.0",
            "--port",
            "0",
            "--tls-cert",
            cert,
            "--tls-key",
            key,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "provider listening on https://0.0.0.0:" in line, line + (
            process.stderr.read() if process.poll() is not None and process.stderr else ""
        )
    finally:
        process.send_signal(signal.SIGTERM)
        _out, err = process.communicate(timeout=20)
    assert 0 == process.returncode, err
    assert "warning" not in err  # TLS: no plain-HTTP warning
