"""KafkaPrincipal: who a connection is, as Kafka names it ("User:alice", "User:ANONYMOUS")."""
from __future__ import annotations

from dataclasses import dataclass

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """"User:alice" -> KafkaPrincipal("User", "alice"); ValueError without a type."""
        kind, sep, name = text.partition(":")
        if not sep or not kind:
            raise ValueError(f"{text!r} is not a principal (Type:name, e.g. User:alice)")
        return cls(kind, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


def user(name: str) -> KafkaPrincipal:
    return KafkaPrincipal(USER_TYPE, name)
