# SPDX-License-Identifier: GPL-2.0-only
"""The one test data pattern of the Python tests (the same bytes as
tests/common/testcommon/pattern.h writes and checks); harness.py beside it
has what every Python harness shares besides.

Import it with tests/common on sys.path:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
"""

import struct

_MASK = (1 << 64) - 1


def pattern_word(seed, i):
    """Word i of seed's pattern (pattern.h's pattern_word)."""
    x = (seed * 0x9E3779B97F4A7C15 + i) & _MASK
    x ^= x >> 31
    x = (x * 0xBF58476D1CE4E5B9) & _MASK
    return x ^ (x >> 29)


def pattern(seed, size):
    """The first `size` bytes of seed's pattern (any size)."""
    words = (size + 7) // 8
    return struct.pack("<%dQ" % words, *(pattern_word(seed, i) for i in range(words)))[:size]
