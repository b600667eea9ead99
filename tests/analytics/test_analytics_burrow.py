"""Burrow's evaluation rules (wiki "Consumer Lag Evaluation Rules"), one case per rule."""
from kcoord.analytics import burrow
from kcoord.analytics.burrow import ERR, OK, REWIND, STALL, STOP, WARN, Window, group_status, partition_status


def window(offsets, lags, start=0, step=60_000):
    return Window(offsets, [start + i * step for i in range(len(offsets))], lags)


def test_no_current_lag_is_ok_whatever_the_window():
    assert partition_status(window([5, 5, 5], [3, 3, 3]), 0, 10**9) == OK


def test_stop_when_silent_longer_than_the_window_spans():
    w = window([10, 20, 30], [5, 5, 5])                  # spans 120 s, last commit at 120 s
    assert partition_status(w, 5, now_ms=120_000 + 121_000) == STOP
    assert partition_status(w, 5, now_ms=120_000 + 119_000) != STOP


def test_stop_is_suppressed_when_the_log_end_was_recently_at_the_commit():
    w = window([10, 20, 30], [5, 5, 5])
    assert partition_status(w, 5, now_ms=10**7, recent_heads=[30, 35]) != STOP


def test_rewind_when_an_offset_goes_back_and_is_not_regained():
    assert partition_status(window([10, 20, 15, 18], [1, 1, 1, 1]), 1, 180_000) == REWIND
    assert partition_status(window([10, 20, 15, 25], [1, 1, 1, 1]), 1, 180_000) != REWIND


def test_lag_zero_anywhere_in_the_window_is_ok():
    assert partition_status(window([10, 10, 10], [4, 0, 4]), 4, 120_000) == OK


def test_stall_when_committing_the_same_offset_with_lag():
    assert partition_status(window([10, 10, 10], [4, 5, 6]), 6, 120_000) == STALL


def test_warn_when_lag_never_decreases():
    assert partition_status(window([10, 20, 30], [4, 4, 9]), 9, 120_000) == WARN
    assert partition_status(window([10, 20, 30], [4, 6, 5]), 5, 120_000) == OK


def test_group_status_is_the_worst_with_stop_stall_rewind_as_err():
    assert group_status([OK, WARN]) == WARN
    assert group_status([OK, STALL, WARN]) == ERR
    assert group_status([OK]) == OK
    assert burrow.CODES[REWIND] == 6 and burrow.CODES[ERR] == 3
