"""storage: partition logs in Kafka's on-disk layout (segments, index, group commit, recovery, compaction).

Knows bytes and offsets, never groups. May import: protocol (record batches).
"""
