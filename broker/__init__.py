"""broker: the composition root — asyncio/uvloop server, API registry and handlers, data plane, config, CLI.

May import: protocol, storage, coordinator. Nothing imports broker.
"""
