"""The one home of body decoding (gzip, deflate; br when the brotli package is there).

Always bounded: output is produced in steps of at most the cap, so a compression bomb is
stopped after `cap` bytes of output, never inflated whole in memory.
"""

from __future__ import annotations

import zlib
from typing import Any

from realprobe.errors import BadResponse, ErrorCode

GZIP = ("gzip", "x-gzip")
IDENTITY = ("identity", "")


class BodyTooLarge(BadResponse):
    def __init__(self, cap: int) -> None:
        super().__init__(
            ErrorCode.INVALID_RESPONSE,
            f"body over the {cap}-byte cap (counted after decompression)",
        )
        self.cap = cap


def normalise(encoding: str | None) -> str:
    return (encoding or "identity").strip().lower()


def _zlib(encoding: str) -> Any:
    if encoding in GZIP:
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return zlib.decompressobj()
    return None


class StreamDecoder:
    """Feeds raw chunks in, returns decoded bytes; raises BodyTooLarge past `cap` and
    BadResponse(INVALID_RESPONSE) for a corrupt stream or an unknown encoding."""

    def __init__(self, encoding: str | None, cap: int) -> None:
        self.encoding = normalise(encoding)
        self.cap = cap
        self.produced = 0
        if self.encoding in IDENTITY:
            self._d: Any = None
        else:
            self._d = _zlib(self.encoding)
            if self._d is None:
                raise BadResponse(
                    ErrorCode.INVALID_RESPONSE, f"unsupported content-encoding {self.encoding!r}"
                )
        self._raw_deflate_tried = False

    @property
    def identity(self) -> bool:
        return self._d is None

    def _count(self, data: bytes) -> bytes:
        self.produced += len(data)
        if self.produced > self.cap:
            raise BodyTooLarge(self.cap)
        return data

    def feed(self, raw: bytes) -> bytes:
        if self._d is None:
            return self._count(raw)
        out = bytearray()
        data = raw
        while data:
            try:
                chunk = self._d.decompress(data, self.cap + 1 - self.produced)
            except zlib.error as exc:
                if self.encoding == "deflate" and not self._raw_deflate_tried and not out:
                    # servers send raw deflate (no zlib header) as often as the RFC's kind
                    self._raw_deflate_tried = True
                    self._d = zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                raise BadResponse(
                    ErrorCode.INVALID_RESPONSE, f"{self.encoding} body is corrupt ({exc})"
                ) from exc
            out += self._count(chunk)
            data = self._d.unconsumed_tail
        return bytes(out)

    def flush(self) -> bytes:
        if self._d is None:
            return b""
        return self._count(self._d.flush())

    @property
    def complete(self) -> bool:
        """For gzip/deflate: the compressed stream ended (nothing truncated)."""
        return self._d is None or bool(self._d.eof)


def decode_whole(data: bytes, encoding: str | None, cap: int) -> bytes | None:
    """A complete encoded body decoded, or None when it is corrupt, truncated, over `cap`
    or in an encoding realprobe cannot decode."""
    enc = normalise(encoding)
    if enc == "br":
        try:
            import brotli  # type: ignore[import-not-found]
        except ImportError:
            return None
        try:
            out = bytes(brotli.decompress(data))
        except Exception:  # brotli raises its own error type
            return None
        return out if len(out) <= cap else None
    try:
        decoder = StreamDecoder(enc, cap)
        out = decoder.feed(data) + decoder.flush()
    except BadResponse:
        return None
    return out if decoder.complete else None
