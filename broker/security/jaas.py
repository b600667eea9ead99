"""The JAAS configuration text Kafka reads from `sasl.jaas.config`:

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";

One or more `<LoginModule class> <flag> key=value ... ;` entries; values are bare words or double-quoted
strings with backslash escapes (as Kafka's JaasConfig tokenizes them). PlainLoginModule's `user_<name>`
options are the users a PLAIN listener accepts (Kafka's PlainServerCallbackHandler).
"""
from __future__ import annotations

from dataclasses import dataclass, field

FLAGS = ("required", "requisite", "sufficient", "optional")
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
USER_PREFIX = "user_"


@dataclass
class LoginModule:
    name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text): kind "word", "string", or the punctuation itself ("=", ";")."""
    out, i, n = [], 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch in "=;":
            out.append((ch, ch))
            i += 1
        elif ch == '"':
            i += 1
            buf = []
            while True:
                if i >= n:
                    raise ValueError("unterminated quoted value")
                ch = text[i]
                if ch == "\\" and i + 1 < n:
                    buf.append(text[i + 1])
                    i += 2
                    continue
                i += 1
                if ch == '"':
                    break
                buf.append(ch)
            out.append(("string", "".join(buf)))
        else:
            start = i
            while i < n and not text[i].isspace() and text[i] not in '=;"':
                i += 1
            out.append(("word", text[start:i]))
    return out


def parse_jaas(text: str) -> list[LoginModule]:
    """ValueError saying what is wrong (the caller names the property)."""
    tokens = _tokens(text)
    modules: list[LoginModule] = []
    i = 0
    while i < len(tokens):
        if i + 1 >= len(tokens) or tokens[i][0] != "word" or tokens[i + 1][0] != "word":
            raise ValueError("expected '<LoginModule class> <flag> key=value ... ;'")
        name, flag = tokens[i][1], tokens[i + 1][1].lower()
        if flag not in FLAGS:
            raise ValueError(f"login module flag {tokens[i + 1][1]!r} is not one of {', '.join(FLAGS)}")
        module = LoginModule(name, flag)
        i += 2
        while True:
            if i >= len(tokens):
                raise ValueError(f"login module {name} does not end with ';'")
            if tokens[i][0] == ";":
                i += 1
                break
            if (i + 2 >= len(tokens) + 0 or tokens[i][0] != "word" or tokens[i + 1][0] != "="
                    or tokens[i + 2][0] not in ("word", "string")):
                raise ValueError(f"login module {name}: expected key=value")
            module.options[tokens[i][1]] = tokens[i + 2][1]
            i += 3
        modules.append(module)
    if not modules:
        raise ValueError("no login module")
    return modules


def plain_users(text: str) -> dict[str, str]:
    """user name -> password from PlainLoginModule's user_<name> options."""
    users: dict[str, str] = {}
    for module in parse_jaas(text):
        if module.name == PLAIN_LOGIN_MODULE:
            users.update({k[len(USER_PREFIX):]: v for k, v in module.options.items() if k.startswith(USER_PREFIX)})
    return users
