

def test_group_max_size():
    """throwIfShareGroupIsFull: a new member beyond group.share.max.size, GROUP_MAX_SIZE_REACHED; members in it
    still heartbeat."""
    ctx = ConsumerGroupContext(topics={"t": 1}, share_group_max_size=1)
    hb(ctx, "g", "a", 0, ["t"])
    full = hb(ctx, "g", "b", 0, ["t"])
    assert (full.error, full.message) == (E.GROUP_MAX_SIZE_REACHED,
                                          "The share group has reached its maximum capacity of 1 members.")
    assert hb(ctx, "g", "a", 1).error == E.NONE
