"""protocol: Kafka's wire format — framing, headers, message codecs, record batches, error codes.

Pure functions, no I/O. May import: the standard library and its codec dependencies only.
"""
