"""Fuzz target: request/response/header decoding must raise nothing but DecodeError.

With atheris installed (coverage-guided):   python fuzz/fuzz_decode.py [libFuzzer flags]
Without it (random + mutated valid inputs): python -m fuzz.fuzz_decode --runs 100000 [--seed N]

The first two input bytes pick the (message, version); the rest is the body. Every 8th input is
also fed whole to the request-header parser.
"""
from __future__ import annotations

import argparse
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "src"))  # the checkout's src/, where kcoord is

from kcoord.protocol import messages as m  # noqa: E402
from kcoord.protocol.errors import DecodeError  # noqa: E402
from kcoord.protocol.headers import decode_request_header  # noqa: E402
from kcoord.protocol.schema import load_spec  # noqa: E402


def _targets() -> list[tuple[str, int]]:
    names = [api + kind for api in m.SERVED_APIS for kind in ("Request", "Response")]
    names += list(m.DATA_MESSAGES)
    out = []
    for name in names:
        low, high = load_spec(name).valid_versions
        out.extend((name, v) for v in range(low, high + 1))
    return out


TARGETS = _targets()


def test_one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    name, version = TARGETS[int.from_bytes(data[:2], "big") % len(TARGETS)]
    body = data[2:]
    try:
        _obj, end = m.codec(name, version).decode(body)
        assert end <= len(body)
    except DecodeError:
        pass
    if data[0] % 8 == 0:
        try:
            decode_request_header(body)
        except DecodeError:
            pass


def _seed_corpus(rng: random.Random) -> list[bytes]:
    """Valid encodings of every target (empty messages of each version) to mutate."""
    corpus = []
    for index, (name, version) in enumerate(TARGETS):
        body = m.codec(name, version).encode(m.message_class(name)())
        corpus.append(index.to_bytes(2, "big") + body)
    return corpus


def _mutate(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        choice = rng.random()
        if choice < 0.4 and len(buf) > 2:
            buf[rng.randrange(2, len(buf))] = rng.randrange(256)
        elif choice < 0.6:
            buf[2 + rng.randrange(max(1, len(buf) - 1)):2] = rng.randbytes(rng.randint(1, 8))
        elif choice < 0.8 and len(buf) > 3:
            del buf[rng.randrange(2, len(buf)):]
        else:
            buf += rng.randbytes(rng.randint(1, 16))
    return bytes(buf)


def random_fuzz(runs: int, seed: int) -> None:
    rng = random.Random(seed)
    corpus = _seed_corpus(rng)
    for i in range(runs):
        if i % 3 == 0:
            data = rng.randbytes(rng.randint(0, 64))
        else:
            data = _mutate(rng, rng.choice(corpus))
        test_one_input(data)
    print(f"{runs} inputs over {len(TARGETS)} (message, version) targets: only DecodeError raised")


def main() -> None:
    try:
        import atheris
    except ImportError:
        parser = argparse.ArgumentParser(description=__doc__)
        parser.add_argument("--runs", type=int, default=100_000)
        parser.add_argument("--seed", type=int, default=0)
        args = parser.parse_args()
        random_fuzz(args.runs, args.seed)
        return
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
