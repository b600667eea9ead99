"""The transaction coordinator (Kafka's transaction-coordinator module, KIP-98/360/447/890).

Pure modules (no asyncio, no sockets): log_format (the `__transaction_state` record formats),
metadata (TransactionMetadata and its transitions), state_manager (the transactions of each loaded
`__transaction_state` partition, changed only by replaying records), coordinator (the handlers:
records out, replay in). runtime binds it to asyncio and storage.
"""
