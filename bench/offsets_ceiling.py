"""Durable-commit ceiling: the least a server must do to answer an OffsetCommit only once durable.

`python -m bench.offsets_ceiling --serve PORT --parts N` is a minimal uvloop server for the offsets
benchmark's committers: it splits frames, looks each request up among the ones the committers send
(each sends the same bytes every time), appends that committer's records — built at start-up, the
same OffsetCommitKey/Value records a coordinator writes — to its `__consumer_offsets` partition through
the storage layer, and answers a fixed OffsetCommitResponse v8 once storage's group commit has fsynced
them. No decoding, validation, group state or record building per request.

Driven by the same C generator as kcoord, its rate is the most a Python server can commit durably on
this machine, with the same sockets, event loop, storage and fsyncs as kcoord. kcoord's rate over it
is what the coordinator's own work costs, and host speed moves both alike.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import signal
import struct
import tempfile

from bench import loadgen_wire as w
from bench.ceiling import ServerProcess

_SIZE = struct.Struct(">i")
_CORR = slice(8, 12)  # a request's correlation id: after size, api key and version
_KEY_FROM = 12  # what follows the correlation id identifies the committer


def commit_response(topic: str, parts: int) -> bytes:
    """OffsetCommitResponse v8 (flexible) with error NONE for partitions 0..parts-1, framed, with a
    zero correlation id for the server to patch."""
    partitions = [struct.pack(">ih", p, w.NONE) + b"\x00" for p in range(parts)]
    body = struct.pack(">i", 0) + w.carray([w.cstr(topic) + w.carray(partitions) + b"\x00"]) + b"\x00"
    payload = struct.pack(">i", 0) + b"\x00" + body  # response header v1: correlation id, tags
    return _SIZE.pack(len(payload)) + payload


class DurableFixedAnswer(asyncio.Protocol):
    """Append the committer's prebuilt batch, answer when it is fsynced."""

    def __init__(self, commits: dict[bytes, tuple], response: bytes):
        self.commits = commits
        self.response = response
        self.buf = bytearray()

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        buf = self.buf
        buf += data
        off, n = 0, len(buf)
        while n - off >= 12:
            size = _SIZE.unpack_from(buf, off)[0]
            if n - off - 4 < size:
                break
            frame = bytes(buf[off : off + 4 + size])
            off += 4 + size
            log, batch = self.commits[frame[_KEY_FROM:]]
            fut = log.sync_future(log.append(batch, trusted=True))  # built here, as the coordinator builds its own
            fut.add_done_callback(lambda f, corr=frame[_CORR]: self._answer(f, corr))
        del buf[:off]

    def _answer(self, fut: asyncio.Future, corr: bytes) -> None:
        if fut.exception() is not None or self.transport.is_closing():
            self.transport.close()  # the generator counts it: never an answer for a lost write
            return
        answer = bytearray(self.response)
        answer[4:8] = corr
        self.transport.write(answer)


def serve(port: int, parts: int, lifetime: float) -> None:
    import uvloop

    from bench import offsets
    from kcoord.protocol.records import build_batch
    from kcoord.storage import LogManager

    async def main_():
        tmp = tempfile.mkdtemp(prefix="kcoord-bench-offsets-ceiling-")
        mgr = LogManager(tmp)
        commits = {}
        for i, frame in enumerate(offsets.commit_frames(parts)):
            group = offsets.group_of(i)
            log = mgr.get_or_create(offsets.OFFSETS_TOPIC, offsets.java_hash_partition(group))
            commits[frame[_KEY_FROM:]] = (log, build_batch(offsets.commit_records(group, parts)))
        response = commit_response(offsets.TOPIC, parts)
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: DurableFixedAnswer(commits, response), "127.0.0.1", port, backlog=4096
        )
        stop = asyncio.Event()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        print("listening", flush=True)
        try:
            await asyncio.wait_for(stop.wait(), lifetime)  # ends by itself even if the parent dies
        except TimeoutError:
            pass
        finally:
            server.close()
            await mgr.close()
            shutil.rmtree(tmp, ignore_errors=True)

    uvloop.run(main_())


class DurableCeiling(ServerProcess):
    """The durable-commit ceiling server as a subprocess; SIGTERM closes and removes its store."""

    def __init__(self, parts: int, lifetime: float = 900):
        super().__init__("bench.offsets_ceiling", "--parts", str(parts), lifetime=lifetime)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", type=int, required=True)
    ap.add_argument("--parts", type=int, required=True)
    ap.add_argument("--lifetime", type=float, default=900)
    a = ap.parse_args()
    serve(a.serve, a.parts, a.lifetime)
