"""Certificates made by the test (never committed): a CA, a server certificate for 127.0.0.1/localhost,
and client certificates with the subjects a test asks for, as PEM files in a directory.

    pki = TestPki(tmp_path)                         # ca.pem, server.pem (key + chain), server.crt/.key
    pki.client("CN=alice,OU=eng,O=kcoord")          # -> ClientCert(cert, key) paths
"""
from __future__ import annotations

import datetime
import ipaddress
import pathlib
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_ATTRS = {"CN": NameOID.COMMON_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME, "O": NameOID.ORGANIZATION_NAME,
          "L": NameOID.LOCALITY_NAME, "ST": NameOID.STATE_OR_PROVINCE_NAME, "C": NameOID.COUNTRY_NAME}


def name_of(rfc2253: str) -> x509.Name:
    """"CN=alice,OU=eng,O=kcoord" (RFC 2253 order: the last RDN first) -> x509.Name."""
    rdns = [x509.NameAttribute(_ATTRS[k.strip()], v.strip())
            for k, v in (part.split("=", 1) for part in rfc2253.split(","))]
    return x509.Name(list(reversed(rdns)))


@dataclass
class ClientCert:
    cert: pathlib.Path
    key: pathlib.Path
    subject: str


def _pem_key(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


class TestPki:
    __test__ = False  # not a pytest class

    def __init__(self, directory: pathlib.Path) -> None:
        self.dir = pathlib.Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = name_of("CN=kcoord test CA,O=kcoord")
        self._ca_name = ca_name
        self._ca = (self._builder(ca_name, self._ca_key.public_key())
                    .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                    .sign(self._ca_key, hashes.SHA256()))
        self.ca = self.dir / "ca.pem"
        self.ca.write_bytes(self._ca.public_bytes(serialization.Encoding.PEM))
        key, cert = self._issue(name_of("CN=localhost,O=kcoord"), server=True)
        self.server_cert = self.dir / "server.crt"
        self.server_key = self.dir / "server.key"
        self.server_cert.write_bytes(cert)
        self.server_key.write_bytes(key)
        self.server_pem = self.dir / "server.pem"  # Kafka's PEM keystore file: key + chain
        self.server_pem.write_bytes(key + cert)

    def _builder(self, subject: x509.Name, public_key) -> x509.CertificateBuilder:
        now = datetime.datetime.now(datetime.UTC)
        return (x509.CertificateBuilder().subject_name(subject)
                .issuer_name(getattr(self, "_ca_name", subject)).public_key(public_key)
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=2)))

    def _issue(self, subject: x509.Name, server: bool) -> tuple[bytes, bytes]:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = self._builder(subject, key.public_key()).add_extension(
            x509.BasicConstraints(ca=False, path_length=None), critical=True)
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        cert = builder.sign(self._ca_key, hashes.SHA256())
        return _pem_key(key), cert.public_bytes(serialization.Encoding.PEM)

    def client(self, subject: str, stem: str | None = None) -> ClientCert:
        key, cert = self._issue(name_of(subject), server=False)
        stem = stem or subject.split(",")[0].split("=")[1]
        paths = ClientCert(self.dir / f"{stem}.crt", self.dir / f"{stem}.key", subject)
        paths.cert.write_bytes(cert)
        paths.key.write_bytes(key)
        return paths
