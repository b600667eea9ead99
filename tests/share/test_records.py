"""__share_group_state records byte for byte, and the partition a share-partition's state lives in."""
from __future__ import annotations

import uuid

import pytest

from kcoord.protocol.errors import DecodeError
from kcoord.share import records as r

T = uuid.UUID(int=7)


def test_snapshot_record_bytes():
    """ShareCoordinatorRecordHelpers.newShareSnapshotRecord with ShareSnapshotKey/Value.json: key = int16
    type 0 + group (int16 string) + topic id + partition; value = int16 version 0 + the flexible struct."""
    rec = r.ShareStateRecord(r.SHARE_SNAPSHOT, "g", T, 2, snapshot_epoch=1, leader_epoch=3, start_offset=5,
                             state_batches=(r.StateBatch(5, 6, r.ACKNOWLEDGED, 1),), delivery_complete_count=-1,
                             state_epoch=0, create_timestamp=9, write_timestamp=9)
    key, value, headers = r.encode(rec)
    assert key == b"\x00\x00" + b"\x00\x01g" + T.bytes + b"\x00\x00\x00\x02"
    assert value == (b"\x00\x00" + (1).to_bytes(4, "big") + (0).to_bytes(4, "big") + (3).to_bytes(4, "big")
                     + (5).to_bytes(8, "big") + (9).to_bytes(8, "big") + (9).to_bytes(8, "big")
                     + b"\x02" + (5).to_bytes(8, "big") + (6).to_bytes(8, "big") + b"\x02" + b"\x00\x01" + b"\x00"
                     + b"\x00")  # the batch's and the value's empty tagged fields (-1: the tag is left out)
    assert headers == ()
    assert r.decode(key, value) == rec


def test_update_record_carries_the_delivery_complete_count_as_tag_0():
    """KIP-1226 (Kafka 4.2): DeliveryCompleteCount, tagged field 0 of the value."""
    rec = r.ShareStateRecord(r.SHARE_UPDATE, "g", T, 0, 0, 0, 10, (r.StateBatch(10, 10, r.ARCHIVED, 5),), 4)
    key, value, _ = r.encode(rec)
    assert key[:2] == b"\x00\x01"
    assert value.endswith(b"\x01\x00\x04\x00\x00\x00\x04")  # one tagged field: tag 0, size 4, 4
    assert r.decode(key, value) == rec
    assert r.decoded((key, value)) == rec


def test_not_a_share_record():
    with pytest.raises(DecodeError):
        r.decode(b"\x00\x03\x00\x01g", b"")
    assert r.record_type(b"\x00\x05") is None


def test_a_tombstone_names_the_share_partition_it_deletes():
    """ShareCoordinatorShard.deleteState writes the share-partition's ShareSnapshot key with a null value."""
    assert r.deleted(r.snapshot_key("g", T, 2), None) == ("g", T, 2)
    rec = r.ShareStateRecord(r.SHARE_UPDATE, "g", T, 2, 0, 0, 10, ())
    key, value, _ = r.encode(rec)
    assert r.deleted(key, value) is None and r.deleted(key, None) is None  # an update key is never a tombstone
    assert r.deleted(r.snapshot_key("g", T, 2), value) is None


@pytest.mark.parametrize("group, partition, n, expected", [
    ("g", 0, 50, 14), ("share-group", 3, 50, 37), ("grüppe", 12, 50, 24), ("g", 0, 3, 0), ("grüppe", 12, 3, 2)])
def test_state_partition_as_kafka_computes_it(group, partition, n, expected):
    """ShareCoordinatorService.partitionFor(SharePartitionKey): Utils.abs(asCoordinatorKey().hashCode()) % n,
    the key "groupId:topicId:partition" with the topic id as Uuid.toString prints it. Expected values
    from Java 17 (String.hashCode, Base64.getUrlEncoder().withoutPadding())."""
    assert r.coordinator_key(group, T, partition) == f"{group}:AAAAAAAAAAAAAAAAAAAABw:{partition}"
    assert r.share_state_partition(group, T, partition, n) == expected
