"""One security description ({"protocol", "ca", "cert", "key", "mechanism", "username", "password"}) in
each client library's own settings, for the consumer workers (tests/broker/groups/workers/consumer.py
--security) and the tests."""
from __future__ import annotations


def kafka_python(sec: dict | None) -> dict:
    if not sec:
        return {}
    out = {"security_protocol": sec["protocol"]}
    if "SSL" in sec["protocol"]:
        out.update(ssl_cafile=sec["ca"], ssl_certfile=sec.get("cert"), ssl_keyfile=sec.get("key"))
    if sec.get("mechanism"):
        out.update(sasl_mechanism=sec["mechanism"], sasl_plain_username=sec["username"],
                   sasl_plain_password=sec["password"])
    return out


def aiokafka(sec: dict | None) -> dict:
    if not sec:
        return {}
    out = kafka_python(sec)
    if "SSL" in sec["protocol"]:
        from aiokafka.helpers import create_ssl_context

        for key in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
            out.pop(key)
        out["ssl_context"] = create_ssl_context(cafile=sec["ca"], certfile=sec.get("cert"), keyfile=sec.get("key"))
    return out


def confluent(sec: dict | None) -> dict:
    if not sec:
        return {}
    out = {"security.protocol": sec["protocol"]}
    if "SSL" in sec["protocol"]:
        out["ssl.ca.location"] = sec["ca"]
        if sec.get("cert"):
            out.update({"ssl.certificate.location": sec["cert"], "ssl.key.location": sec["key"]})
    if sec.get("mechanism"):
        out.update({"sasl.mechanism": sec["mechanism"], "sasl.username": sec["username"],
                    "sasl.password": sec["password"]})
    return out


def kcat(sec: dict | None) -> list[str]:
    """`-X key=value` arguments (librdkafka's names, as confluent)."""
    return [arg for key, value in confluent(sec).items() for arg in ("-X", f"{key}={value}")]
