"""Server TLS contexts from Kafka's PEM settings, and the principal a client certificate names.

Python's ssl module does the TLS. Kafka's PEM options: `ssl.keystore.location` (a PEM file with the
private key and the certificate chain) or `ssl.keystore.certificate.chain` + `ssl.keystore.key` (the PEM
text itself), `ssl.key.password` for an encrypted key; `ssl.truststore.location` or
`ssl.truststore.certificates` for the CAs client certificates are checked against.
`ssl.client.auth`: none (no certificate asked), requested (asked, optional), required.
"""
from __future__ import annotations

import os
import ssl
import tempfile
from typing import Any

from kcoord.broker.security.listener_config import setting
from kcoord.broker.security.principal import ANONYMOUS, KafkaPrincipal, user
from kcoord.broker.security.tls_accept import DirectSSLObject

_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


def _error(message: str) -> Exception:
    from kcoord.broker.config import ConfigError

    return ConfigError(message)


def server_context(cfg: Any, listener: str) -> ssl.SSLContext:
    """ConfigError naming the key when a store cannot be read."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.sslobject_class = DirectSSLObject  # the same TLS, fewer Python calls per record
    versions_key, versions = setting(cfg, listener, "ssl.enabled.protocols")
    try:
        chosen = sorted(_PROTOCOLS[v] for v in versions)
    except KeyError as exc:
        raise _error(f"property {versions_key!r}: {exc.args[0]} is not one of {', '.join(_PROTOCOLS)}") from None
    ctx.minimum_version, ctx.maximum_version = chosen[0], chosen[-1]
    password = setting(cfg, listener, "ssl.key.password")[1]
    location_key, location = setting(cfg, listener, "ssl.keystore.location")
    try:
        if location:
            ctx.load_cert_chain(location, password=password)
        else:
            _load_inline_chain(ctx, setting(cfg, listener, "ssl.keystore.certificate.chain")[1],
                               setting(cfg, listener, "ssl.keystore.key")[1], password)
            location_key = "ssl.keystore.certificate.chain"
    except (OSError, ssl.SSLError) as exc:
        raise _error(f"property {location_key!r}: cannot load the certificate chain and key: {exc}") from None
    auth = setting(cfg, listener, "ssl.client.auth")[1]
    trust_key, trust = setting(cfg, listener, "ssl.truststore.location")
    certificates = setting(cfg, listener, "ssl.truststore.certificates")[1]
    try:
        if trust:
            ctx.load_verify_locations(cafile=trust)
        elif certificates:
            trust_key = "ssl.truststore.certificates"
            ctx.load_verify_locations(cadata=certificates)
    except (OSError, ssl.SSLError) as exc:
        raise _error(f"property {trust_key!r}: cannot load the trusted certificates: {exc}") from None
    ctx.verify_mode = _CLIENT_AUTH[auth]
    return ctx


def _load_inline_chain(ctx: ssl.SSLContext, chain: str, key: str, password: str | None) -> None:
    # load_cert_chain reads files only: the PEM text goes through a private temporary file.
    fd, path = tempfile.mkstemp(prefix="kcoord-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(key.strip() + "\n" + chain.strip() + "\n")
        ctx.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


# RFC 2253 attribute type names (as Java's X500Principal.getName() writes them) for the names Python's
# ssl module gives; other attributes are written as their OID with the value's DER encoding in hex.
_SHORT = {"commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
          "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
          "domainComponent": "DC", "userId": "UID"}
_OIDS = {"emailAddress": ("1.2.840.113549.1.9.1", 0x16), "serialNumber": ("2.5.4.5", 0x13),
         "title": ("2.5.4.12", 0x0C), "givenName": ("2.5.4.42", 0x0C), "surname": ("2.5.4.4", 0x0C),
         "pseudonym": ("2.5.4.65", 0x0C), "initials": ("2.5.4.43", 0x0C), "generationQualifier": ("2.5.4.44", 0x0C),
         "dnQualifier": ("2.5.4.46", 0x13), "businessCategory": ("2.5.4.15", 0x0C), "postalCode": ("2.5.4.17", 0x0C)}


def _escape(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (ch == "#" and i == 0) or (ch == " " and i in (0, len(value) - 1)):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def _der_hex(tag: int, value: str) -> str:
    data = value.encode("utf-8")
    n = len(data)
    length = bytes([n]) if n < 0x80 else bytes([0x80 | ((n.bit_length() + 7) // 8)]) + n.to_bytes(
        (n.bit_length() + 7) // 8, "big")
    return "#" + (bytes([tag]) + length + data).hex()


def rfc2253(subject: tuple) -> str:
    """The subject of `SSLSocket.getpeercert()` as RFC 2253 text: last RDN first, "CN=x,O=y"."""
    rdns = []
    for rdn in reversed(subject):
        parts = []
        for name, value in rdn:
            if name in _SHORT:
                parts.append(f"{_SHORT[name]}={_escape(value)}")
            elif name in _OIDS:
                oid, tag = _OIDS[name]
                parts.append(f"{oid}={_der_hex(tag, value)}")
            else:
                parts.append(f"{name}={_escape(value)}")
        rdns.append("+".join(parts))
    return ",".join(rdns)


def peer_principal(ssl_object: Any) -> KafkaPrincipal:
    """Kafka's DefaultKafkaPrincipalBuilder over SSL: User:<the client certificate's subject>, or
    User:ANONYMOUS when the client sent none."""
    cert = ssl_object.getpeercert() if ssl_object is not None else None
    if not cert or not cert.get("subject"):
        return ANONYMOUS
    return user(rfc2253(cert["subject"]))
