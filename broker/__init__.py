"""broker: the serving path: the asyncio/uvloop server, connections, the API registry and handlers
(apis/), the data plane (data/), server-side security, config, hooks and faults, the admin endpoint,
and the composition root (app.py).

May import: protocol, storage, coordinator, txn, metadata, observability. Above it: tools, the test kit.
"""
