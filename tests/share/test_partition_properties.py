"""Random interleavings of acquire / acknowledge / lock expiry / member release across members, with
writes that fail now and then (Kafka's SharePartition under a flaky persister):

- an offset is never ACQUIRED by two members at once, and never delivered once ACKNOWLEDGED;
- the delivery count a consumer sees for an offset never goes down (release_member gives back the count
  of an acquisition that was never delivered -- Kafka's DeliveryCountOps.DECREASE -- so the next delivery
  shows the same count, not a lower one);
- the start offset never moves backwards;
- a share-partition loaded from the written records has the live one's durable state, and agrees with
  it on every acknowledged offset.
"""
from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.protocol.errors import ErrorCode
from kcoord.share.partition import ACKNOWLEDGED, ACQUIRED, ShareConfig, SharePartition

T = uuid.UUID(int=9)
MEMBERS = ("a", "b", "c")
CONFIG = ShareConfig(delivery_count_limit=3, record_lock_duration_ms=100, max_record_locks=12,
                     snapshot_update_records=3)

op = st.one_of(
    st.tuples(st.just("acquire"), st.sampled_from(MEMBERS), st.integers(0, 30), st.integers(1, 6),
              st.integers(1, 8), st.booleans()),
    st.tuples(st.just("ack"), st.sampled_from(MEMBERS), st.integers(0, 30), st.integers(0, 5),
              st.sampled_from((0, 1, 2, 3, 4))),
    st.tuples(st.just("sleep"), st.integers(1, 120)),
    st.tuples(st.just("leave"), st.sampled_from(MEMBERS)),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(op, max_size=60), st.lists(st.booleans(), min_size=60, max_size=60))
def test_random_interleavings(ops, write_fails):
    sp = SharePartition("g", T, 0, CONFIG)
    log: list = []
    now = 0

    def write(records, fail):
        if fail:
            sp.rollback(records)
            return
        for record in records:
            log.append(record)
            sp.replay(record)

    write(sp.initialize("earliest", 0, 0, now), False)
    holder: dict[int, str] = {}       # offset -> member it was delivered to, while ACQUIRED
    last_count: dict[int, int] = {}   # offset -> delivery count of its last delivery
    acknowledged: set[int] = set()
    start = sp.start_offset
    for step, operation in enumerate(ops):
        fail = write_fails[step % len(write_fails)] and step % 3 == 0
        before = sp.in_flight()
        if operation[0] == "acquire":
            _, member, base, size, max_records, strict = operation
            batches = [(o, o + 1) for o in range(base, base + size * 2, 2)]
            got = sp.acquire(member, batches, max_records, now, strict=strict)
            write(got.records, False)
            for first, last, count in got.acquired:
                for offset in range(first, last + 1):
                    state = before.get(offset)
                    assert state is None or state[0] != ACQUIRED, f"{offset} acquired twice"
                    assert offset not in acknowledged, f"{offset} delivered after it was acknowledged"
                    assert count >= last_count.get(offset, 0), f"delivery count of {offset} went down"
                    last_count[offset] = count
                    holder[offset] = member
        elif operation[0] == "ack":
            _, member, first, length, ack_type = operation
            out = sp.acknowledge(member, [(first, first + length, [ack_type])], now)
            if out.error == ErrorCode.NONE:
                write(out.records, fail)
        elif operation[0] == "sleep":
            now += operation[1]
            write(sp.expire_locks(now).records, fail)
        else:
            write(sp.release_member(operation[1], now).records, fail)
        for offset, (state, _count, member, _) in sp.in_flight().items():
            if state == ACQUIRED:
                assert member == holder[offset]
            if state == ACKNOWLEDGED:
                acknowledged.add(offset)
        assert sp.start_offset >= start, "start offset moved backwards"
        start = sp.start_offset
        acknowledged |= set(range(0, start)) & set(last_count)

    loaded = SharePartition.load("g", T, 0, [(k, v) for k, v, _ in log], CONFIG)
    assert loaded.durable.summary() == sp.durable.summary()
    assert loaded.start_offset == sp.start_offset
    live = sp.in_flight()
    for offset, (state, *_rest) in loaded.in_flight().items():
        if state == ACKNOWLEDGED:
            assert live[offset][0] == ACKNOWLEDGED
    for offset, (state, *_rest) in live.items():
        if state == ACKNOWLEDGED:  # every write was replayed or rolled back: nothing is pending
            assert loaded.in_flight()[offset][0] == ACKNOWLEDGED
