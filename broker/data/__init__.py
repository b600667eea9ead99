"""The data plane's state owners: topics (names, ids, partition counts, configs), idempotent-producer
state, and long-poll fetch waiters. Handlers in broker/apis/ call into these; these call storage."""
