"""tools: the `kcoord` command (cli.py; `python -m kcoord.tools`) and the wire clients it uses.

May import: protocol, storage, coordinator, txn, metadata, observability, broker. Nothing imports tools.
"""
