"""The PySpark 4 Python Data Source over Kafka-format log dirs: `spark.read.format("kcoord_log")`.

Options: `path` (log dirs, comma-separated), `records`:
  - "commits": offset commits from `__consumer_offsets-N` (offsets.SCHEMA), decoded vectorised;
  - "groups":  GroupMetadata records with members, assignments and record headers (GROUPS_SCHEMA);
  - "consumer_groups": KIP-848 consumer group records, key types 3-8 and 16 (consumer_records.SCHEMA);
  - "share_state": KIP-932's `__share_group_state-N` records, ShareSnapshot / ShareUpdate (share_records.SCHEMA);
  - "batches": one row per batch of the data topics (BATCH_SCHEMA, headers only); internal topics
    (`__consumer_offsets`, `__transaction_state`, `__cluster_metadata`, ...) are left out.
  `verify_crc` ("true"): stop a segment at its first batch whose CRC does not match.
One Spark partition per segment; `read` yields Arrow record batches. Works the same for our store and
a real Kafka broker's log dirs. Paths are opened by the executors, so on a cluster they must be on
storage every executor can read.
"""
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from kcoord.analytics import layout

MODES = ("commits", "groups", "consumer_groups", "share_state", "batches")


class SegmentPartition(InputPartition):
    def __init__(self, segment, later_paths):
        super().__init__(segment.path)
        self.segment, self.later_paths = segment, later_paths


def _arrow_schema(mode):
    from kcoord.analytics import consumer_records, offsets, segment, share_records

    return {"commits": offsets.SCHEMA, "groups": segment.GROUPS_SCHEMA, "consumer_groups": consumer_records.SCHEMA,
            "share_state": share_records.SCHEMA, "batches": segment.BATCH_SCHEMA}[mode]


class KcoordLogSource(DataSource):
    @classmethod
    def name(cls):
        return "kcoord_log"

    def _mode(self):
        mode = self.options.get("records", "commits")
        if mode not in MODES:
            raise ValueError(f"records must be one of {MODES}, not {mode!r}")
        return mode

    def schema(self):
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(_arrow_schema(self._mode()))

    def reader(self, schema):
        return KcoordLogReader(self.options.get("path", ""), self._mode(),
                               self.options.get("verify_crc", "true").lower() == "true")


class KcoordLogReader(DataSourceReader):
    def __init__(self, path, mode, verify_crc):
        self.path, self.mode, self.verify_crc = path, mode, verify_crc

    def partitions(self):
        if self.mode == "batches":
            segments = layout.data_segments(self.path)
            return [SegmentPartition(s, []) for s in segments] or [InputPartition(None)]
        topic = "__share_group_state" if self.mode == "share_state" else layout.OFFSETS_TOPIC
        segments = layout.list_segments(self.path, topics={topic})
        parts = [SegmentPartition(s, [x.path for x in layout.following(s, segments)]) for s in segments]
        return parts or [InputPartition(None)]       # no segments: one empty partition

    def read(self, partition):
        from kcoord.analytics.segment import SegmentDecoder, batch_summaries, read_file

        seg = getattr(partition, "segment", None)
        if seg is None:
            return
        buf = read_file(seg.path)
        if self.mode == "batches":
            yield batch_summaries(buf, seg.topic, seg.partition, self.verify_crc)
            return
        decoder = SegmentDecoder(buf, seg.partition, partition.later_paths, self.verify_crc)
        yield from {"commits": decoder.commits, "groups": decoder.groups,
                    "consumer_groups": decoder.consumer_groups, "share_state": decoder.share_state}[self.mode]()


def load(spark, log_dirs, records):
    return (spark.read.format(KcoordLogSource.name()).option("records", records)
            .option("path", ",".join(layout.split_log_dirs(log_dirs))).load())


def commits(spark, log_dirs):
    return load(spark, log_dirs, "commits")


def groups(spark, log_dirs):
    return load(spark, log_dirs, "groups")


def consumer_groups(spark, log_dirs):
    return load(spark, log_dirs, "consumer_groups")


def share_state(spark, log_dirs):
    return load(spark, log_dirs, "share_state")


def data_batches(spark, log_dirs):
    return load(spark, log_dirs, "batches")
