"""Security: TLS and SASL listeners, SCRAM credentials, ACLs and the authorizer (Kafka's names and rules)."""
