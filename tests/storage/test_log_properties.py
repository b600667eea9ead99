"""Property tests: any interleaving of appends, rolls, truncations, reads and reopenings returns
exactly what was appended; a torn last batch (cut at any byte) is the only thing recovery drops."""
import os
import shutil
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kcoord.protocol.records import build_batch, decode_records, iter_batches
from kcoord.storage import LogConfig, OffsetOutOfRangeError, PartitionLog

CONFIG = LogConfig(segment_bytes=2000, index_interval_bytes=100)


def batches_in(data: bytes) -> list[tuple[int, list[bytes]]]:
    return [(h.base_offset, [r.value for r in decode_records(b)]) for _, h, b in iter_batches(data)]


class LogMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="kcoord-log-")
        self.log = PartitionLog(os.path.join(self.dir, "p-0"), "p", 0, CONFIG)
        self.model: list[tuple[int, list[bytes], int]] = []  # (base offset, values, size)
        self.counter = 0

    def teardown(self):
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def end(self) -> int:
        return self.model[-1][0] + len(self.model[-1][1]) if self.model else 0

    @rule(sizes=st.lists(st.integers(min_value=0, max_value=120), min_size=1, max_size=4),
          compression=st.sampled_from([0, 0, 1, 3]), batches=st.integers(min_value=1, max_value=3))
    def append(self, sizes, compression, batches):
        record_sets = []
        expected = []
        for _ in range(batches):
            values = []
            for size in sizes:
                self.counter += 1
                values.append(b"%d:" % self.counter + b"x" * size)
            record_sets.append(build_batch([(None, v) for v in values], compression=compression, timestamp_ms=1))
            expected.append(values)
        info = self.log.append(b"".join(record_sets))
        assert info.base_offset == self.end
        for values, data in zip(expected, record_sets, strict=True):
            self.model.append((self.end, values, len(data)))
        assert info.last_offset == self.end - 1

    @rule()
    def roll(self):
        self.log.roll()

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def truncate(self, data):
        index = data.draw(st.integers(min_value=0, max_value=len(self.model) - 1))
        offset = self.model[index][0]
        self.log.truncate_to(offset)
        del self.model[index:]

    @rule()
    def reopen(self):
        self.log.close()
        self.log = PartitionLog(os.path.join(self.dir, "p-0"), "p", 0, CONFIG)

    @rule(data=st.data(), max_bytes=st.integers(min_value=1, max_value=800))
    def read(self, data, max_bytes):
        offset = data.draw(st.integers(min_value=0, max_value=self.end))
        got = batches_in(self.log.read(offset, max_bytes))
        if offset == self.end:
            assert got == []
            return
        first = next(i for i, (base, values, _) in enumerate(self.model) if base + len(values) > offset)
        expected, total = [], 0
        for base, values, size in self.model[first:]:
            if expected and total + size > max_bytes:
                break
            expected.append((base, values))
            total += size
        # Reads stop at a segment's end, so they may return a prefix of what fits.
        assert got and got == expected[:len(got)]
        # A bound (e.g. a high watermark) keeps exactly the batches that start below it.
        bound = data.draw(st.integers(min_value=offset, max_value=self.end), label="max_offset")
        bounded = batches_in(self.log.read(offset, max_bytes, max_offset=bound))
        assert bounded == [b for b in got if b[0] < bound]

    @rule()
    def read_past_end_is_out_of_range(self):
        try:
            self.log.read(self.end + 1, 100)
        except OffsetOutOfRangeError:
            return
        raise AssertionError("read past the end succeeded")

    @invariant()
    def offsets_match_model(self):
        assert self.log.log_end_offset == self.end
        everything = []
        offset = 0
        while offset < self.end:
            chunk = batches_in(self.log.read(offset, 1 << 20))
            everything.extend(chunk)
            offset = chunk[-1][0] + len(chunk[-1][1])
        assert everything == [(base, values) for base, values, _ in self.model]


TestLogMachine = LogMachine.TestCase
TestLogMachine.settings = settings(max_examples=25, stateful_step_count=25, deadline=None)


def _write_log(directory, n_batches, segment_bytes=10_000):
    log = PartitionLog(directory, "p", 0, LogConfig(segment_bytes=segment_bytes))
    for i in range(n_batches):
        log.append(build_batch([(b"k", b"value-%d" % i + b"!" * i), (None, None)], timestamp_ms=i,
                               compression=i % 2))
    log.close()


def test_recovery_after_cutting_the_last_batch_at_every_byte(tmp_path):
    source = str(tmp_path / "src-0")
    _write_log(source, 4, segment_bytes=300)  # two segments: the tear is in the last one
    names = sorted(os.listdir(source))
    last_log = [n for n in names if n.endswith(".log")][-1]
    data = open(os.path.join(source, last_log), "rb").read()
    starts = [p for p, _, _ in iter_batches(data)]
    last_start = starts[-1]
    full = PartitionLog(source, "p", 0, LogConfig(segment_bytes=300))
    expected_all = batches_in(b"".join(full.read(o, 1) for o in range(0, 8, 2)))
    full.close()
    assert len(expected_all) == 4
    for cut in range(last_start, len(data) + 1):
        target = str(tmp_path / f"cut{cut}-0")
        os.mkdir(target)
        for name in names:
            shutil.copy(os.path.join(source, name), target)
        with open(os.path.join(target, last_log), "r+b") as f:
            f.truncate(cut)
        log = PartitionLog(target, "p", 0, LogConfig(segment_bytes=300))
        kept = 4 if cut == len(data) else 3
        assert log.log_end_offset == 2 * kept
        assert batches_in(b"".join(log.read(o, 1) for o in range(0, 2 * kept, 2))) == expected_all[:kept]
        expected_size = len(data) if kept == 4 else last_start
        assert os.path.getsize(os.path.join(target, last_log)) == expected_size
        assert log.append(build_batch([(None, b"next")], timestamp_ms=1)).base_offset == 2 * kept
        log.close()
        shutil.rmtree(target)


def test_recovery_after_garbage_overwrites_the_tail(tmp_path):
    directory = str(tmp_path / "g-0")
    _write_log(directory, 3)  # offsets 0-1, 2-3, 4-5
    path = os.path.join(directory, "00000000000000000000.log")
    data = open(path, "rb").read()
    last = [p for p, _, _ in iter_batches(data)][-1]
    # Every byte the CRC covers, plus length and magic. (Base offset and leader epoch are outside
    # the CRC by design, in Kafka too: only an offset going backwards is detectable there.)
    positions = [last + 8, last + 11, last + 16, last + 17, *range(last + 21, len(data), 5), len(data) - 1]
    for position in positions:
        with open(path, "r+b") as f:
            f.seek(position)
            f.write(bytes([data[position] ^ 0x5A]))
        log = PartitionLog(directory, "g", 0, LogConfig())
        assert log.log_end_offset == 4
        log.close()
        with open(path, "wb") as f:
            f.write(data)
    with open(path, "r+b") as f:
        f.seek(last)
        f.write((1).to_bytes(8, "big"))  # base offset 1 < expected 2
    log = PartitionLog(directory, "g", 0, LogConfig())
    assert log.log_end_offset == 4


@settings(max_examples=40, deadline=None)
@given(n_batches=st.integers(min_value=1, max_value=6), data=st.data())
def test_recovery_from_arbitrary_damage_keeps_the_intact_prefix(tmp_path_factory, n_batches, data):
    directory = str(tmp_path_factory.mktemp("dmg") / "d-0")
    _write_log(directory, n_batches)
    path = os.path.join(directory, "00000000000000000000.log")
    original = open(path, "rb").read()
    starts = [p for p, _, _ in iter_batches(original)]
    at = data.draw(st.integers(min_value=0, max_value=len(original) - 1), label="at")
    junk = data.draw(st.binary(min_size=1, max_size=80), label="junk")
    damaged = original[:at] + junk + original[at + len(junk):]
    with open(path, "wb") as f:
        f.write(damaged)
    log = PartitionLog(directory, "d", 0, LogConfig())
    # Every batch wholly before the damage survives byte for byte; whatever is served verifies.
    intact = sum(1 for end in starts[1:] + [len(original)] if end <= at)
    assert log.log_end_offset >= 2 * intact
    served = []
    offset = 0
    while offset < log.log_end_offset:
        (_, header, view), = iter_batches(log.read(offset, 1), verify=True)
        served.append(bytes(view))
        offset = header.next_offset
    assert b"".join(served[:intact]) == original[:starts[intact] if intact < len(starts) else len(original)]
    log.close()
