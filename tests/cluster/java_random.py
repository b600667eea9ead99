"""A random source that draws as java.util.Random's public contract says (nextInt(bound) by rejection on
31-bit draws, Collections.shuffle from the end), over the small linear congruential generator of Kafka's
test MockRandom (server-common/src/test/java/org/apache/kafka/server/util/MockRandom.java): with it the
placer must give the placements Kafka's StripedReplicaPlacerTest expects."""
from __future__ import annotations

_MASK64 = (1 << 64) - 1
_MULTIPLIER = 2862933555777941757
_INCREMENT = 3037000493


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


class KafkaMockRandom:
    def __init__(self, state: int = 17) -> None:
        self.state = state

    def _next(self, bits: int) -> int:
        self.state = (self.state * _MULTIPLIER + _INCREMENT) & _MASK64
        return _int32(self.state >> (64 - bits))

    def randrange(self, stop: int) -> int:
        """Random.nextInt(stop)."""
        r = self._next(31)
        m = stop - 1
        if stop & m == 0:
            return _int32((stop * r) >> 31)
        u = r
        while True:
            r = u % stop
            if _int32(u - r + m) >= 0:
                return r
            u = self._next(31)

    def shuffle(self, items: list) -> None:
        """Collections.shuffle(list, random)."""
        for i in range(len(items), 1, -1):
            j = self.randrange(i)
            items[i - 1], items[j] = items[j], items[i - 1]
