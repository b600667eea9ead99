"""The data plane's state owners: appends and batch validation, idempotent-producer state, transaction
indexes and markers, visibility (the high watermark) and long-poll fetch waiters. Handlers in
broker/apis/ call into these; these call storage. Topic metadata lives in metadata/."""
