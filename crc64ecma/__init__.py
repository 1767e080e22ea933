"""CRC-64/ECMA-182 as COS reports it in ``x-cos-hash-crc64ecma`` (decimal), for whole objects, multipart ones too.

A package of its own because both sides of the wire need the same arithmetic and neither may import the other:
the emulator (the cloud) combines a multipart object's CRC from its parts, the client (providers/tencent) combines
the CRCs of the ranges it fetched in parallel, so a download is verified without reading the file again.

COS's "crc64ecma" is the reflected CRC-64 that crcmod and xz compute (poly 0x42F0E1EBA9EA3693, init and xorout
all ones; shared/reference/client-recipes.md §3.5): fastcrc's ``crc64.xz`` matches it bit for bit and continues
from a previous value. ``combine`` is zlib's crc32_combine in 64 bits.
"""

from __future__ import annotations

from functools import lru_cache

from fastcrc import crc64

_REFLECTED_POLY = 0xC96C5795D7870F42
_BITS = 64

Matrix = tuple[int, ...]  # column i is the image of bit i: a linear map over GF(2)^64


def update(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """The CRC of everything seen so far followed by ``data`` (``crc`` 0, the CRC of nothing, starts afresh)."""
    return int(crc64.xz(data, crc))


def combine(crc1: int, crc2: int, len2: int) -> int:
    """The CRC of A+B from crc(A), crc(B) and len(B)."""
    if len2 == 0:
        return crc1
    return _apply(_zeros_operator(len2), crc1) ^ crc2


def _apply(matrix: Matrix, vector: int) -> int:
    out = 0
    i = 0
    while vector:
        if vector & 1:
            out ^= matrix[i]
        vector >>= 1
        i += 1
    return out


def _compose(outer: Matrix, inner: Matrix) -> Matrix:
    return tuple(_apply(outer, column) for column in inner)


@lru_cache(maxsize=64)
def _zeros_operator(length: int) -> Matrix:
    """The map that feeds ``length`` zero bytes through the CRC register. Cached: an upload's parts mostly share
    one size, so combining 10 000 parts costs one matrix build and 10 000 cheap applications."""
    one_bit: Matrix = (_REFLECTED_POLY, *(1 << (i - 1) for i in range(1, _BITS)))
    power = one_bit
    for _ in range(3):  # 2**3 bits: one zero byte
        power = _compose(power, power)
    result: Matrix = tuple(1 << i for i in range(_BITS))
    while length:
        if length & 1:
            result = _compose(power, result)
        length >>= 1
        if length:
            power = _compose(power, power)
    return result
