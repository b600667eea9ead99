"""A leader changes its own ISR by compare-and-set, not through the controller.

Kafka before 2.7 did exactly this: the leader wrote the new ISR to the partition's state znode with a
conditional setData on its zkVersion (ReplicationUtils.updateLeaderAndIsr, Partition.updateIsr) and
refused to act on a BADVERSION. Since 2.7 the leader asks the controller with AlterPartition
(KIP-497, KIP-841, KIP-903) and the controller runs the checks (ReplicationControlManager.
validateAlterPartitionData). Here the leader runs those same checks (partition_change.alter_isr) on
the state it reads and makes the write conditional on what they assumed:

- `mod_revision(topics/<t>/p/<p>) == expected`: nobody changed the partition since the leader read it
  (an election, a controller-made shrink, another ISR write); otherwise the answer is what the checks
  give on the fresh state (FENCED_LEADER_EPOCH after an election, INVALID_UPDATE_VERSION otherwise);
- `create_revision(brokers/ids/<leader>) == its broker epoch`: the leader is still the registration it
  was (a leader whose lease expired cannot write: STALE_BROKER_EPOCH);
- for every ISR member, its registration is the one checked (`create_revision == epoch` when the epoch
  is known, else present): a replica that died meanwhile is never added (INELIGIBLE_REPLICA, KIP-841,
  atomically rather than from a possibly stale view).
"""
from __future__ import annotations

from collections.abc import Collection, Mapping

from kcoord.cluster import keys
from kcoord.cluster.partition_change import IsrChangeRequest, alter_isr
from kcoord.cluster.partition_state import PartitionRegistration
from kcoord.metadata.store import Compare, Get, MetadataStore, Put, created_at, modified_at, present
from kcoord.protocol.errors import ErrorCode


async def write_isr_change(
    store: MetadataStore,
    topic: str,
    partition: int,
    expected_mod_revision: int,
    request: IsrChangeRequest,
    live: Collection[int],
    registered_epochs: Mapping[int, int],
) -> ErrorCode:
    """Validate `request` as AlterPartition would and CAS-write it. Returns the ErrorCode Kafka's
    AlterPartition answers for the partition: NONE (written, or already so), NEW_LEADER_ELECTED (written:
    it completed a reassignment that moves the leadership away), or the refusal."""
    key = keys.partition_key(topic, partition)
    kv = await store.get(key)
    if kv is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    current = PartitionRegistration.decode(kv.value)
    outcome = alter_isr(current, request, live, registered_broker_epochs=registered_epochs)
    if kv.mod_revision != expected_mod_revision:
        # the leader's view is old: its epochs will say how (an election fences it); same epochs with a
        # moved revision cannot happen (every write bumps the partition epoch), but is refused as one
        return outcome.error if outcome.error is not ErrorCode.NONE else ErrorCode.INVALID_UPDATE_VERSION
    if outcome.registration is None:
        return outcome.error
    members = sorted(set(request.new_isr) | {request.leader_id})
    compares: list[Compare] = [modified_at(key, expected_mod_revision)]
    for broker in members:
        epoch = registered_epochs.get(broker)
        member = keys.broker_key(broker)
        compares.append(present(member) if epoch is None else created_at(member, epoch))
    result = await store.txn(compares, [Put(key, outcome.registration.encode())],
                             [Get(key), Get(keys.broker_key(request.leader_id))])
    if result.succeeded:
        return outcome.error
    found, leader = result.responses
    if not isinstance(found, tuple) or not found:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if found[0].mod_revision != expected_mod_revision:
        fresh = PartitionRegistration.decode(found[0].value)
        error = alter_isr(fresh, request, live, registered_broker_epochs=registered_epochs).error
        return error if error is not ErrorCode.NONE else ErrorCode.INVALID_UPDATE_VERSION
    leader_epoch = registered_epochs.get(request.leader_id)
    if not isinstance(leader, tuple) or not leader or (
            leader_epoch is not None and leader[0].create_revision != leader_epoch):
        return ErrorCode.STALE_BROKER_EPOCH
    return ErrorCode.INELIGIBLE_REPLICA
