"""Each listener's security settings, resolved as Kafka resolves them.

`listener.security.protocol.map` gives a listener name its protocol (PLAINTEXT, SSL, SASL_PLAINTEXT,
SASL_SSL). A setting is read from `listener.name.<listener>.<key>` first, then `<key>`; SASL's JAAS text
from `listener.name.<listener>.<mechanism>.sasl.jaas.config` (mechanism in lower case), then
`sasl.jaas.config`. `check_listeners` runs when the configuration is loaded and names the key of the
first thing wrong; it reads no files (broker/security/tls.py does, when the server starts).
"""
from __future__ import annotations

from typing import Any

from kcoord.broker.security import jaas

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# Kafka's PASSWORD-type settings: DescribeConfigs answers them as sensitive, `kcoord config` hides them.
SENSITIVE = frozenset({"ssl.keystore.password", "ssl.key.password", "ssl.truststore.password", "ssl.keystore.key",
                       "ssl.keystore.certificate.chain", "ssl.truststore.certificates", "sasl.jaas.config"})
# Settings that may be given per listener (listener.name.<listener>.<key>).
PER_LISTENER = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.password", "ssl.truststore.certificates", "ssl.client.auth", "ssl.principal.mapping.rules",
    "ssl.enabled.protocols", "sasl.enabled.mechanisms", "sasl.jaas.config", "connections.max.reauth.ms",
    "max.connections", "max.connection.creation.rate",  # connection quotas (SocketServer.ListenerReconfigurableConfigs)
})


def _error(message: str) -> Exception:
    from kcoord.broker.config import ConfigError

    return ConfigError(message)


def protocol_map(cfg: Any) -> dict[str, str]:
    out = {}
    for item in cfg.get("listener.security.protocol.map").split(","):
        if not item.strip():
            continue
        name, sep, proto = item.strip().partition(":")
        if not sep or proto.strip().upper() not in PROTOCOLS:
            raise _error(f"property 'listener.security.protocol.map': {item.strip()!r} is not "
                         f"LISTENER:{'|'.join(PROTOCOLS)}")
        out[name.strip().upper()] = proto.strip().upper()
    return out


def security_protocol(cfg: Any, listener: str) -> str:
    return protocol_map(cfg)[listener.upper()]


def _key(listener: str, key: str, mechanism: str | None = None) -> str:
    middle = f"{mechanism.lower()}." if mechanism else ""
    return f"listener.name.{listener.lower()}.{middle}{key}"


def setting(cfg: Any, listener: str, key: str, mechanism: str | None = None) -> tuple[str, Any]:
    """(the property name it came from, typed value) of `key` for `listener`."""
    from kcoord.broker.config import PROPERTIES

    candidates = ([_key(listener, key, mechanism)] if mechanism else []) + [_key(listener, key)]
    for name in candidates:
        if name in cfg.per_listener:
            try:
                return name, PROPERTIES[key].parse(cfg.per_listener[name])
            except (ValueError, TypeError) as exc:
                raise _error(f"property {name!r}: {exc}") from None
    return key, cfg.get(key)


def _check_per_listener_keys(cfg: Any) -> None:
    lowered = {listener.name.lower() for listener in cfg.listeners}
    for name in cfg.per_listener:
        rest = name[len("listener.name."):]
        listener, _, key = rest.partition(".")
        mech, _, after = key.partition(".")
        if key not in PER_LISTENER and not (after == "sasl.jaas.config"
                                             and mech.upper() in MECHANISMS + ("GSSAPI", "OAUTHBEARER")):
            raise _error(f"unknown property {name!r}")
        if listener not in lowered:
            continue  # Kafka accepts settings for listeners it does not run
        setting(cfg, listener, key if key in PER_LISTENER else "sasl.jaas.config",
                None if key in PER_LISTENER else mech)  # parses the value


def check_listeners(cfg: Any) -> None:
    """ConfigError naming the key of the first listener setting that cannot work."""
    _check_per_listener_keys(cfg)
    protocols = protocol_map(cfg)
    for listener in cfg.listeners:
        proto = protocols.get(listener.name)
        if proto is None:
            raise _error(f"property 'listener.security.protocol.map' has no security protocol for listener "
                         f"{listener.name}")
        if proto in ("SSL", "SASL_SSL"):
            _check_tls(cfg, listener.name)
        if proto in ("SASL_PLAINTEXT", "SASL_SSL"):
            _check_sasl(cfg, listener.name)
    name = cfg.get("authorizer.class.name")
    if name not in ("", STANDARD_AUTHORIZER):
        raise _error(f"property 'authorizer.class.name': kcoord provides {STANDARD_AUTHORIZER} only, not {name!r}")
    for text in cfg.get("super.users"):
        from kcoord.broker.security.principal import KafkaPrincipal

        try:
            KafkaPrincipal.parse(text)
        except ValueError as exc:
            raise _error(f"property 'super.users': {exc}") from None


def _check_tls(cfg: Any, listener: str) -> None:
    for kind in ("keystore", "truststore"):
        key, value = setting(cfg, listener, f"ssl.{kind}.type")
        location = setting(cfg, listener, f"ssl.{kind}.location")[1]
        inline = setting(cfg, listener, "ssl.keystore.key" if kind == "keystore" else "ssl.truststore.certificates")[1]
        if (location or inline) and value.upper() != "PEM":
            raise _error(f"property {key!r}: kcoord reads PEM stores only (set {key}=PEM), not {value!r}")
    location_key, location = setting(cfg, listener, "ssl.keystore.location")
    chain, key = setting(cfg, listener, "ssl.keystore.certificate.chain")[1], setting(cfg, listener, "ssl.keystore.key")[1]
    if location and (chain or key):
        raise _error(f"property {location_key!r}: give either a keystore file or ssl.keystore.certificate.chain"
                     " with ssl.keystore.key, not both")
    if not location and not (chain and key):
        raise _error(f"property {_key(listener, 'ssl.keystore.location')!r} (or ssl.keystore.location, or "
                     f"ssl.keystore.certificate.chain + ssl.keystore.key) is required by {listener}'s TLS")
    auth_key, auth = setting(cfg, listener, "ssl.client.auth")
    trusted = setting(cfg, listener, "ssl.truststore.location")[1] or setting(
        cfg, listener, "ssl.truststore.certificates")[1]
    if auth != "none" and not trusted:
        raise _error(f"property 'ssl.truststore.location' (or ssl.truststore.certificates) is required when "
                     f"{auth_key}={auth}")
    rules_key, rules = setting(cfg, listener, "ssl.principal.mapping.rules")
    if rules.strip() != "DEFAULT":
        raise _error(f"property {rules_key!r}: kcoord supports DEFAULT only")


def _check_sasl(cfg: Any, listener: str) -> None:
    key, mechanisms = setting(cfg, listener, "sasl.enabled.mechanisms")
    if not mechanisms:
        raise _error(f"property {key!r}: {listener} is a SASL listener with no mechanism")
    for mech in mechanisms:
        if mech not in MECHANISMS:
            raise _error(f"property {key!r}: mechanism {mech!r} is not served (kcoord serves "
                         f"{', '.join(MECHANISMS)})")
    if "PLAIN" in mechanisms:
        jaas_key, text = setting(cfg, listener, "sasl.jaas.config", "PLAIN")
        if not text:
            raise _error(f"property {_key(listener, 'sasl.jaas.config', 'PLAIN')!r} (PlainLoginModule with "
                         f"user_<name>=\"<password>\" entries) is required by PLAIN on {listener}")
        try:
            jaas.plain_users(text)
        except ValueError as exc:
            raise _error(f"property {jaas_key!r}: {exc}") from None


def plain_users(cfg: Any, listener: str) -> dict[str, str]:
    return jaas.plain_users(setting(cfg, listener, "sasl.jaas.config", "PLAIN")[1] or "")
