"""coordinator: the classic consumer-group GroupCoordinator, after the seeds, with an injected clock.

No sockets, no asyncio outside its small runtime module. May import: protocol, storage.
"""
