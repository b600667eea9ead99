"""Consumer groups (KIP-848, Kafka 4's `modern/consumer`): the ConsumerGroupHeartbeat protocol.

The server owns the assignment: each heartbeat may change the member's subscription (bumping the group
epoch), recompute the group's target assignment (target.py with an assignor from assignors/), and move
the member one step towards it (reconciliation.py: a partition reaches its new owner only once the
previous owner has revoked it). Every change is a record (records.py) and state (consumer_group.py,
member.py) changes only when a record is replayed, after the append is durable. manager.py owns the
groups of one shard; heartbeat.py computes a heartbeat's records and answer. Online migration
(migration.py, classic_members.py): a classic group upgrades when a consumer-protocol member joins it,
classic members live in a consumer group, and it downgrades when the last consumer-protocol member goes.
"""
