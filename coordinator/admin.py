"""DescribeGroups, ListGroups, DeleteGroups and OffsetDelete (KIP-496)."""
from __future__ import annotations

from collections.abc import Callable, Iterable

from coordinator.core import map_write_error
from coordinator.group_state import GroupState
from coordinator.offsets import OffsetsMixin, subscribed_topics
from coordinator.records import Record, group_metadata_tombstone, offset_commit_tombstone
from coordinator.replay import replay_offset_commit
from coordinator.results import DescribedGroup, DescribedMember, ListedGroup
from protocol.errors import ErrorCode

S = GroupState
TopicPartition = tuple[str, int]


class AdminMixin(OffsetsMixin):

    def handle_describe_groups(self, group_ids: Iterable[str], request_version: int = 5) -> list[DescribedGroup]:
        """Member metadata and assignments only in Stable. An unknown group is "Dead" with NONE, except
        from v6 (KIP-1043) where it is GROUP_ID_NOT_FOUND."""
        out = []
        for group_id in group_ids:
            error = self.validate_group_status(group_id, require_non_empty=False)
            group = None if error is not None else self.get_group(group_id)
            if error is not None:
                out.append(DescribedGroup(group_id, error, "", "", ""))
            elif group is None or group.is_(S.DEAD):
                err = ErrorCode.GROUP_ID_NOT_FOUND if request_version >= 6 else ErrorCode.NONE
                out.append(DescribedGroup(group_id, err, str(S.DEAD), "", ""))
            elif group.is_(S.STABLE):
                protocol = group.protocol_name or ""
                members = [DescribedMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                           m.metadata(protocol), m.assignment) for m in group.all_member_metadata()]
                out.append(DescribedGroup(group_id, ErrorCode.NONE, str(group.state), group.protocol_type or "",
                                          protocol, members))
            else:
                members = [DescribedMember(m.member_id, m.group_instance_id, m.client_id, m.client_host, b"", b"")
                           for m in group.all_member_metadata()]
                out.append(DescribedGroup(group_id, ErrorCode.NONE, str(group.state), group.protocol_type or "",
                                          "", members))
        return out

    def handle_list_groups(self, states_filter: Iterable[str] | None = None) -> list[ListedGroup]:
        """Local, loaded groups, optionally only those whose state is in `states_filter` (any case).
        Whether every partition is loaded (COORDINATOR_LOAD_IN_PROGRESS) is the caller's question."""
        wanted = {s.lower() for s in states_filter} if states_filter else None
        return [ListedGroup(g.group_id, g.protocol_type or "", str(g.state)) for g in self.groups.values()
                  if self.is_group_local(g.group_id) and not self.is_group_loading(g.group_id)
                  and (wanted is None or g.state.lower_name in wanted)]

    def handle_delete_groups(self, group_ids: Iterable[str],
                             callback: Callable[[dict[str, ErrorCode]], None]) -> None:
        """Empty groups only; each deleted group's offsets and metadata are tombstoned."""
        results: dict[str, ErrorCode] = {}
        writes: list[tuple[str, list[Record]]] = []
        for group_id in group_ids:
            error = self.validate_group_status(group_id, require_non_empty=False)
            group = None if error is not None else self.get_group(group_id)
            if error is not None:
                results[group_id] = error
            elif group is None or group.is_(S.DEAD):
                results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif not group.is_(S.EMPTY):
                results[group_id] = ErrorCode.NON_EMPTY_GROUP
            else:
                group.transition_to(S.DEAD, self.now_ms())
                records = [offset_commit_tombstone(group_id, t, p) for t, p in group.offsets]
                records.append(group_metadata_tombstone(group_id))
                group.offsets.clear()
                del self.groups[group_id]
                self.log.info("Group %s deleted (%d offsets)", group_id, len(records) - 1,
                              extra={"group_id": group_id, "event": "group_deleted"})
                writes.append((group_id, records))
                results[group_id] = ErrorCode.NONE
        if not writes:
            callback(results)
            return
        remaining = [len(writes)]

        def written(group_id: str, error: ErrorCode) -> None:
            if error != ErrorCode.NONE:
                results[group_id] = map_write_error(error)
            remaining[0] -= 1
            if remaining[0] == 0:
                callback(results)

        for group_id, records in writes:
            self.append_records(group_id, records, lambda e, g=group_id: written(g, e))

    def handle_delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition],
                              callback: Callable[[tuple[ErrorCode, dict[TopicPartition, ErrorCode]]], None]) -> None:
        """KIP-496: delete committed offsets of topics the group does not consume.
        `callback((top_level_error, {(topic, partition): error}))`, once the tombstones are durable."""
        partitions = list(partitions)
        error = self.validate_group_status(group_id, require_non_empty=False)
        group = None if error is not None else self.get_group(group_id)
        if error is None and (group is None or group.is_(S.DEAD)):
            error = ErrorCode.GROUP_ID_NOT_FOUND
        if error is None and not group.is_(S.EMPTY) and group.protocol_type != "consumer":
            error = ErrorCode.NON_EMPTY_GROUP
        if error is not None:
            callback((error, {}))
            return
        subscribed = (subscribed_topics(group) or set()) if not group.is_(S.EMPTY) else set()
        results: dict[TopicPartition, ErrorCode] = {}
        records: list[Record] = []
        for tp in partitions:
            if tp[0] in subscribed:
                results[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                continue
            results[tp] = ErrorCode.NONE
            if tp in group.offsets or tp in group.pending_offset_commits:
                records.append(offset_commit_tombstone(group_id, *tp))
                replay_offset_commit(group, tp[0], tp[1], None)
        if not records:
            callback((ErrorCode.NONE, results))
            return
        self.log.info("Deleted %d offsets of group %s", len(records), group_id,
                      extra={"group_id": group_id, "event": "offsets_deleted"})

        def written(err: ErrorCode) -> None:
            callback((map_write_error(err) if err != ErrorCode.NONE else ErrorCode.NONE, results))

        self.append_records(group_id, records, written)


    def handle_topics_deleted(self, topics: Iterable[str]) -> int:
        """Deleted topics take their committed offsets with them (tombstones); returns how many."""
        topics = set(topics)
        written = 0
        for group in list(self.groups.values()):
            if not self.is_group_local(group.group_id) or self.is_group_loading(group.group_id):
                continue
            gone = [tp for tp in group.offsets if tp[0] in topics]
            if not gone:
                continue
            for t, p in gone:
                replay_offset_commit(group, t, p, None)
            written += len(gone)
            self.log.info("Removed %d offsets of deleted topics from group %s", len(gone), group.group_id,
                          extra={"group_id": group.group_id, "event": "offsets_deleted"})
            self.append_records(group.group_id, [offset_commit_tombstone(group.group_id, t, p) for t, p in gone],
                                lambda e, g=group.group_id: self._log_cleanup(g, e))
        return written
