"""Share groups' data plane on this node (KIP-932): the share coordinator's log (`__share_group_state`),
the share-partitions and share sessions that ShareFetch / ShareAcknowledge use. The state machines are
kcoord.share's (pure); this package binds them to asyncio, storage and the long poll.

coordinator.py   ShareCoordinator (single node): appends share-partition records to __share_group_state
                 (durable before an acknowledgement is answered) and reads them back at start
coordinator_service.py  ShareCoordinatorService (cluster): the share coordinator on each __share_group_state
                 partition's leader, loaded on election; answers the share-state RPCs, writes replicated
persister.py     ShareStatePersister (cluster): the data leader's share-state RPCs to each key's coordinator
local_state.py   the share-state RPCs on a single node, over the manager's own share-partitions
manager.py       SharePartitionManager: share-partitions by (group, topic id, partition), initialized from
                 share.auto.offset.reset, one operation at a time each; acquire from the log, acknowledge,
                 release a closed session's records, acquisition-lock expiry; the share session cache
log_reader.py    what a share fetch reads: whole batches from the partition log, below the high watermark
                 (read_committed: below the last stable offset, aborted batches and markers to archive)
"""
