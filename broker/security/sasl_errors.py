"""Why a SASL exchange failed, and what the client is told.

Kafka's SaslServerAuthenticator answers a SaslAuthenticationException with its own message and any other
SaslException with a fixed one that leaks nothing (not even whether the user exists)."""
from __future__ import annotations


class SaslFailure(Exception):
    def __init__(self, reason: str, *, public: bool = False, illegal_state: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.public = public            # the reason itself may go to the client
        self.illegal_state = illegal_state

    def client_message(self, mechanism: str, reauthenticating: bool) -> str:
        if self.public:
            return self.reason
        which = "re-authentication" if reauthenticating else "authentication"
        return f"Authentication failed during {which} due to invalid credentials with SASL mechanism {mechanism}"
