"""tools: the `kcoord` command (cli.py; `python -m kcoord` or `python -m kcoord.tools`) and its subcommands.

May import: protocol, storage, coordinator, txn, metadata, observability, broker. Nothing imports tools.
"""
