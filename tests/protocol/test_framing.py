"""FrameSplitter: frames come out whole however the stream is chopped; limits are enforced."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.protocol.errors import DecodeError
from kcoord.protocol.framing import DEFAULT_MAX_FRAME_BYTES, FrameSplitter, FrameTooLarge


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def feed_in_pieces(splitter: FrameSplitter, stream: bytes, cuts: list[int]) -> list[bytes]:
    out = []
    prev = 0
    for cut in sorted(set(cuts)) + [len(stream)]:
        out.extend(bytes(f) for f in splitter.feed(stream[prev:cut]))
        prev = cut
    return out


@settings(max_examples=200, deadline=None)
@given(payloads=st.lists(st.binary(max_size=40), max_size=8), data=st.data())
def test_frames_survive_any_chopping(payloads, data):
    stream = b"".join(frame(p) for p in payloads)
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=12))
    splitter = FrameSplitter()
    assert feed_in_pieces(splitter, stream, cuts) == payloads
    assert splitter.buffered == 0


def test_partial_frame_is_kept_until_complete():
    splitter = FrameSplitter()
    assert splitter.feed(frame(b"abcdef")[:7]) == []
    assert splitter.buffered == 3
    assert [bytes(f) for f in splitter.feed(b"def" + frame(b"x"))] == [b"abcdef", b"x"]


def test_frame_inside_one_chunk_is_a_view_of_that_chunk():
    chunk = frame(b"hello") + frame(b"world")
    frames = FrameSplitter().feed(chunk)
    assert [f.obj for f in frames] == [chunk, chunk]   # zero-copy views of the fed bytes


def test_empty_frame():
    assert [bytes(f) for f in FrameSplitter().feed(frame(b"") + frame(b"a"))] == [b"", b"a"]


def test_oversized_frame_is_refused_before_reading_it():
    splitter = FrameSplitter(max_frame_bytes=10)
    with pytest.raises(FrameTooLarge) as info:
        splitter.feed(struct.pack(">i", 11))
    assert isinstance(info.value, DecodeError)
    assert "11" in str(info.value)


def test_oversized_prefix_split_across_chunks_is_refused():
    splitter = FrameSplitter(max_frame_bytes=10)
    splitter.feed(b"\x00\x00")
    with pytest.raises(FrameTooLarge):
        splitter.feed(b"\x00\x0b")


def test_absurd_prefix_allocates_nothing_up_front():
    splitter = FrameSplitter()
    assert splitter.feed(struct.pack(">i", DEFAULT_MAX_FRAME_BYTES) + b"abc") == []
    assert splitter.buffered == 3


def test_negative_size_is_a_decode_error():
    with pytest.raises(DecodeError):
        FrameSplitter().feed(struct.pack(">i", -1))


def test_default_max_is_kafkas_socket_request_max_bytes():
    assert FrameSplitter().max_frame_bytes == 104857600
