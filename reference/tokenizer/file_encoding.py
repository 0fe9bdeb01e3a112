"""Encode a text file into a ``.npy`` token array for training (SPEC §3 datasets).

The text is streamed through ``Tokenizer.encode_iterable`` and the ids are
written as they come, so neither the text nor the token array is ever held
whole in memory. The ``.npy`` header is written first with room for any
length and rewritten with the final length at the end (the header is padded
to a fixed size, as ``numpy.lib.format`` allows), so the result opens with
``np.load(path, mmap_mode="r")``. Ids are uint16 when the vocabulary has at
most 65,536 ids, else uint32.
"""

import ast
import codecs
import io
import time
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from lmspec.reference._types import PathLike
from lmspec.reference.tokenizer.tokenizer import Tokenizer

__all__ = ["EncodeStats", "encode_file", "token_dtype"]

_READ_BYTES: int = 1 << 20
_WRITE_TOKENS: int = 1 << 20
_HEADER_BYTES: int = 128  # magic + version + length + padded dict; a multiple of 64


@dataclass(frozen=True)
class EncodeStats:
    """What ``encode_file`` did: bytes of text read, tokens written, wall-clock seconds."""

    bytes_read: int
    tokens: int
    seconds: float
    dtype: str

    @property
    def bytes_per_token(self) -> float:
        """Compression ratio (0 for an empty file)."""
        return self.bytes_read / self.tokens if self.tokens else 0.0

    @property
    def megabytes_per_second(self) -> float:
        """Throughput in MB (10^6 bytes) of text per second."""
        return self.bytes_read / 1e6 / self.seconds if self.seconds > 0 else 0.0


def token_dtype(vocab_size: int) -> np.dtype:
    """uint16 when every id fits (``vocab_size <= 65536``), else uint32."""
    return np.dtype(np.uint16) if vocab_size <= 1 << 16 else np.dtype(np.uint32)


def _npy_header(dtype: np.dtype, length: int) -> bytes:
    """A version-1.0 ``.npy`` header of exactly ``_HEADER_BYTES`` bytes for a 1-D array."""
    fields = {
        "descr": np.lib.format.dtype_to_descr(dtype),
        "fortran_order": False,
        "shape": (length,),
    }
    text = repr(fields)
    body = text.encode("latin-1").ljust(_HEADER_BYTES - 10 - 1) + b"\n"
    if len(body) != _HEADER_BYTES - 10 or ast.literal_eval(text) != fields:
        raise ValueError(f"npy header for length {length} does not fit in {_HEADER_BYTES} bytes")
    return b"\x93NUMPY\x01\x00" + (len(body)).to_bytes(2, "little") + body


def _decode(decoder: codecs.IncrementalDecoder, data: bytes, path: Path, offset: int, final: bool = False) -> str:
    """``decoder.decode(data)``; invalid UTF-8 is a ValueError naming the first
    bad byte's offset in the file (``offset``: where ``data`` starts)."""
    try:
        return decoder.decode(data, final=final)
    except UnicodeDecodeError as err:
        # The decoder reports positions within its pending bytes + this block.
        pending = len(decoder.getstate()[0])
        raise ValueError(
            f"{str(path)!r} is not valid UTF-8: first bad byte at byte offset "
            f"{offset - pending + err.start} ({err.reason})"
        ) from None


def _text_chunks(path: Path, bar: tqdm) -> Iterator[str]:
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0
    with open(path, "rb") as f:
        while block := f.read(_READ_BYTES):
            text = _decode(decoder, block, path, offset)
            offset += len(block)
            bar.update(len(block))
            yield text
        yield _decode(decoder, b"", path, offset, final=True)


def encode_file(
    tokenizer: Tokenizer, input_path: PathLike, output_path: PathLike, *, progress: bool = True
) -> EncodeStats:
    """Encode the UTF-8 file ``input_path`` into a 1-D ``.npy`` of token ids at ``output_path``.

    Raises:
        ValueError: the input is not valid UTF-8.
        FileNotFoundError: ``input_path`` does not exist.
    """
    source = Path(input_path)
    if not source.is_file():
        raise FileNotFoundError(f"encode_file: input file {str(source)!r} does not exist or is not a file")
    dtype = token_dtype(len(tokenizer.vocab))
    typecode = "H" if dtype == np.uint16 else "I"
    if array(typecode).itemsize != dtype.itemsize:
        raise RuntimeError(f"array typecode {typecode!r} does not match {dtype}")
    started = time.perf_counter()
    tokens = 0
    bar = tqdm(
        total=source.stat().st_size,
        unit="B",
        unit_scale=True,
        desc=f"encode {source.name}",
        disable=not progress,
    )
    with open(output_path, "wb") as out:
        out.write(_npy_header(dtype, 0))
        buffer = array(typecode)
        for ids in tokenizer.encode_iterable_batches(_text_chunks(source, bar)):
            buffer.extend(ids)
            if len(buffer) >= _WRITE_TOKENS:
                _write_little_endian(out, buffer)
                tokens += len(buffer)
                buffer = array(typecode)
        _write_little_endian(out, buffer)
        tokens += len(buffer)
        out.seek(0)
        out.write(_npy_header(dtype, tokens))
    bar.close()
    return EncodeStats(
        bytes_read=source.stat().st_size,
        tokens=tokens,
        seconds=time.perf_counter() - started,
        dtype=str(dtype),
    )


def _write_little_endian(out: io.BufferedIOBase, buffer: array) -> None:
    if np.little_endian:
        buffer.tofile(out)
    else:
        swapped = array(buffer.typecode, buffer)
        swapped.byteswap()
        swapped.tofile(out)
