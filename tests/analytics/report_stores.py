"""Stores at the two ends the HTML report must read well at: one group with one commit and no lag,
and many groups over many hours (more than the report's top-N)."""
from tests.analytics.scenario import T0, Store

HOUR = 3_600_000


def small(root) -> Store:
    """One group, one member, one generation, one commit at the log end (zero lag)."""
    s = Store(root)
    s.produce("orders", 0, T0, 5)
    s.complete_generation("solo", 1, {"m1": {"orders": [0]}}, T0 + 100, "initial_join", T0, 50, 10, "m1")
    s.commit("solo", T0 + 1000, {("orders", 0): 5})
    return s


def large(root, groups=40, hours=6) -> Store:
    """`groups` groups on a 4-partition topic over `hours` hours: commits every 5 minutes, lag that grows
    differently per group, and a rebalance in each group every few hours."""
    s = Store(root)
    parts = [("events", p) for p in range(4)]
    produced = dict.fromkeys(parts, 0)
    committed = {(g, tp): 0 for g in range(groups) for tp in parts}
    causes = ["member_joined", "session_timeout", "member_left", "metadata_changed"]
    generation = dict.fromkeys(range(groups), 0)
    for g in range(groups):
        generation[g] = 1
        s.complete_generation(f"group-{g:02d}", 1, {f"c{g}": {"events": [0, 1, 2, 3]}}, T0 + g, "initial_join",
                              T0, 100, 20, f"c{g}")
    step = 300_000
    for i in range(1, hours * HOUR // step + 1):
        t = T0 + i * step
        for tp in parts:
            s.produce(*tp, t - 1000, 40)
            produced[tp] += 40
        for g in range(groups):
            if i % (6 + g % 30) == 0:  # every group rebalances now and then, for several causes
                generation[g] += 1
                members = {f"c{g}-{generation[g]}": {"events": [0, 1]}, f"c{g}": {"events": [2, 3]}}
                s.complete_generation(f"group-{g:02d}", generation[g], members, t - 500,
                                      causes[(g + i) % len(causes)], t - 3000, 2000, 300, f"c{g}")
            speed = 40 - (g % 10) * 3  # the slow ones fall behind
            offsets = {}
            for tp in parts:
                committed[(g, tp)] = min(produced[tp], committed[(g, tp)] + speed)
                offsets[tp] = committed[(g, tp)]
            s.commit(f"group-{g:02d}", t, offsets)
    return s
