"""tools: the `kcoord` command (cli.py; `python -m kcoord.tools`) and the wire clients it uses.

May import: protocol, storage, coordinator, txn, metadata, observability, broker. Nothing imports tools
except the test kit, which starts `kcoord serve` and drives the admin endpoint through admin_client.
"""
