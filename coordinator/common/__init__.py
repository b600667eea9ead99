"""What the group and the transaction coordinators' runtimes share (Kafka's `coordinator-common`).

kcoord.coordinator.runtime (groups, `__consumer_offsets`) and kcoord.txn.runtime (transactions,
`__transaction_state`) differ in their records and managers; they share the clock, how an append's
error reaches the client, the periodic background work, and the tests' hold on loads. Those live here,
in a subpackage that imports nothing else of the coordinator (tests/test_layering.py checks it), so the
transaction coordinator may import it without depending on the group coordinator's code. Pure: no
asyncio (a runtime hands in its loop's futures and sleep).
"""
