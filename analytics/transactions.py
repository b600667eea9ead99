"""Which batches of a log are visible: transactional data counts only once its COMMIT marker is seen.

Records of a transactional batch are held per producer id; a control batch whose marker is COMMIT
releases them, ABORT drops them (as Kafka's coordinator loader does). A transaction still open at the
end of a segment is decided by the first marker for that producer in the following segments; one
still open at the end of the log is not visible (read_committed).
"""
import numpy as np

from kcoord.analytics.batches import CONTROL, TRANSACTIONAL

ABORT, COMMIT = 0, 1


def visible_batches(scan, marker_type, lookahead=None) -> np.ndarray:
    """Boolean per batch: True for data that is visible. Control batches are never "visible".

    marker_type(i) -> ABORT/COMMIT for control batch i; lookahead(pids) -> {pid: is_commit} from
    the later segments of the same partition."""
    attrs, pids = scan["attributes"], scan["producer_id"]
    visible = (attrs & (CONTROL | TRANSACTIONAL)) == 0
    pending: dict[int, list[int]] = {}
    for i in np.flatnonzero(attrs & (CONTROL | TRANSACTIONAL)).tolist():
        pid = int(pids[i])
        if attrs[i] & CONTROL:
            held = pending.pop(pid, [])
            if held and marker_type(i) == COMMIT:
                visible[held] = True
        else:
            pending.setdefault(pid, []).append(i)
    if pending and lookahead is not None:
        for pid, committed in lookahead(set(pending)).items():
            if committed:
                visible[pending[pid]] = True
    return visible
