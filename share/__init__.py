"""The share coordinator's side of share groups (KIP-932, "queues for Kafka").

partition.py   SharePartition: one (group, topic, partition)'s in-flight window -- each offset AVAILABLE,
               ACQUIRED, ACKNOWLEDGED or ARCHIVED, its delivery count and acquisition lock; acquire,
               acknowledge (ACCEPT / RELEASE / REJECT / RENEW), member release, lock expiry; every change
               returns the records that make it durable, and replay / load rebuild from them
state.py       DurableShareState: the share coordinator's view of one share-partition, changed only by
               replaying ShareSnapshot / ShareUpdate records; Kafka's snapshot rule
session.py     ShareSessionCache: share sessions (epochs per member) and the errors ShareFetch /
               ShareAcknowledge answer for them (SharePartitionManager.newContext)
records.py     the __share_group_state records in Kafka's formats and the partition of that topic a
               share-partition's state lives in ("groupId:topicId:partition", Java hash)

Pure: no sockets, no asyncio, time comes in as `now_ms`. The group side (membership, assignment) is
kcoord.coordinator.share.
"""
