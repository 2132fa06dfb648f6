"""Rows held as stored, decoded once (``features._decode``): for every encoding (float32, float16,
bfloat16 words, int8 with per-column scale and zero), every backend (memory, pread, io_uring) and every
host tier (buffer, static cache, the GPU tier run on the CPU), the tiers move the stored words bit for
bit and the one decode gives the rows a NumPy reference decodes, bit for bit, at odd dims (2-byte rows
of 129 values: a packed 258-byte row; of 250: 500 bytes padded to a sector, staged) and at aligned
ones (2-byte rows of 256 values: io_uring reads them straight into the buffer's slots)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import run

import outre_async as oa
from outre_async.features import (
    DeviceFeatureCache,
    FeatureBuffer,
    GpuTier,
    MemorySource,
    PreadSource,
    SourceTier,
    StaticFeatureCache,
    detect_io_uring,
    make_tier,
)
from outre_async.features._decode import RowDecoder, as_tensor, room_of
from outre_async.features._device_rows import assemble_x
from outre_async.features._uring_source import UringSource
from outre_async.loader._batch_memory import BatchMemory, MatrixLease
from outre_async.store import FeatureFile, RowFormat
from outre_async.store._layout import choose_row_layout

pytestmark = pytest.mark.timeout(240)

N = 300
ENCODINGS = ["float32", "float16", "bfloat16", "int8"]
WORDS = {"float32": np.float32, "float16": np.float16, "bfloat16": np.uint16, "int8": np.int8}
BACKENDS = ["memory", "pread", pytest.param("io_uring", marks=pytest.mark.skipif(not detect_io_uring(),
                                                                                   reason="io_uring unavailable"))]


def words_of(encoding: str, dim: int, seed: int = 0) -> tuple[np.ndarray, dict[str, Any]]:
    """Random stored words of ``encoding`` ``[N, dim]`` and the format's extra fields (int8: scale, zero),
    written here with numpy, not by the package."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, dim)).astype(np.float32)
    if encoding == "float32":
        return x, {}
    if encoding == "float16":
        return x.astype(np.float16), {}
    if encoding == "bfloat16":  # the top half of float32's bits (a truncating cast: any words will do)
        return (x.view(np.uint32) >> 16).astype(np.uint16), {}
    scale = rng.uniform(0.01, 0.1, dim).astype(np.float32)
    zero = rng.integers(-20, 20, dim).astype(np.float32)
    return rng.integers(-128, 128, (N, dim)).astype(np.int8), {"scale": scale, "zero": zero}


def reference(encoding: str, words: np.ndarray, extra: dict[str, Any], delivered: str = "float32") -> np.ndarray:
    """The NumPy reference decode (the issue's formulas), then the delivered cast (bfloat16 by torch)."""
    if encoding in ("float32", "float16"):
        x = words.astype(np.float32)
    elif encoding == "bfloat16":
        x = (words.astype(np.uint32) << 16).view(np.float32)
    else:
        x = (extra["scale"] * (words.astype(np.float32) - extra["zero"])).astype(np.float32)
    if delivered == "float32":
        return x
    if delivered == "float16":
        return x.astype(np.float16)
    return torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)


def write_file(path: Path, words: np.ndarray, fmt: RowFormat) -> FeatureFile:
    """The words at the layout's stride (zero padding), as the store lays rows out."""
    layout = choose_row_layout(fmt.stored_row_bytes)
    raw = np.zeros((N, layout.stride), np.uint8)
    raw[:, : fmt.stored_row_bytes] = words.view(np.uint8).reshape(N, -1)
    raw.tofile(path)
    return FeatureFile(path=path, num_rows=N, format=fmt, layout=layout)


def open_words(backend: str, file: FeatureFile, words: np.ndarray) -> Any:
    if backend == "memory":
        return MemorySource(words)
    return PreadSource(file) if backend == "pread" else UringSource(file)


IDS = {"random": np.random.default_rng(3).integers(0, N, 400), "all": np.random.default_rng(4).permutation(N),
       "duplicates": np.repeat(np.arange(0, N, 37), 3)}


async def read_through(backend: str, file: FeatureFile, words: np.ndarray, fmt: RowFormat, top_name: str,
                       ids: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
    async with open_words(backend, file, words) as source:
        buffer = FeatureBuffer(N, 64, fmt.dim, held=fmt.held)
        top: Any = make_tier("buffer", make_tier("source", source), buffer=buffer, piece_rows=16)
        if top_name == "static":
            cache = StaticFeatureCache(np.arange(0, N, 3), N, fmt.dim, held=fmt.held)
            await cache.load(source)
            top = make_tier("static", top, cache=cache)
        elif top_name == "gpu":
            gpu = DeviceFeatureCache(np.arange(1, N, 4), N, fmt.dim, held=fmt.held)
            await gpu.load(source)
            top = GpuTier(top, gpu)
        out = np.empty((len(ids), fmt.dim), fmt.held)
        rows = await top.read_batch(ids, out)
        host = as_tensor(out if rows is None else out[: len(rows.miss_pos)])
        x = assemble_x(host, rows, RowDecoder(fmt), held=out if rows is None else None)
        return x, source.stats()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dim", [129, 250, 256])  # 2-byte rows: 258 B packed, 500 B padded to 512, 512 B
@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("top_name", ["buffer", "static", "gpu"])
def test_every_encoding_backend_and_tier_delivers_the_reference_decode(tmp_path: Path, backend: str, dim: int,
                                                                        encoding: str, top_name: str) -> None:
    words, extra = words_of(encoding, dim)
    fmt = RowFormat(dim=dim, stored=np.dtype(WORDS[encoding]), encoding=encoding, **extra)
    file = write_file(tmp_path / "features.bin", words, fmt)
    for label, ids in IDS.items():
        x, io = run(read_through(backend, file, words, fmt, top_name, ids))
        assert x.dtype == torch.float32
        np.testing.assert_array_equal(x.numpy(), reference(encoding, words, extra)[ids], err_msg=label)
    if dim == 250:  # rows padded to whole sectors (int8's 250 B stay packed): a slot cannot take the stride
        assert file.layout.layout == ("packed" if encoding == "int8" else "padded")
    if backend == "io_uring" and top_name == "buffer":  # unpadded whole-sector rows are read into slots
        aligned = fmt.stored_row_bytes % 512 == 0
        assert (io["rows_into_slots"] > 0) == aligned, (fmt.stored_row_bytes, io)


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("delivered", ["float32", "float16", "bfloat16"])
def test_host_and_torch_decodes_agree_with_the_reference_bit_for_bit(encoding: str, delivered: str) -> None:
    words, extra = words_of(encoding, 129, seed=1)
    fmt = RowFormat(dim=129, stored=np.dtype(WORDS[encoding]), encoding=encoding, **extra).delivering(delivered)
    decoder, want = RowDecoder(fmt), reference(encoding, words, extra, delivered)
    host = np.empty(want.shape, fmt.delivered)
    decoder.decode_host(words, host)
    np.testing.assert_array_equal(host.view(np.uint8), want.view(np.uint8))
    by_torch = decoder.decode(as_tensor(words))  # what a GPU runs after the copy, here on the CPU
    assert by_torch.dtype == getattr(torch, delivered)
    got = by_torch.view(torch.int16).numpy() if delivered == "bfloat16" else by_torch.numpy()
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize(("encoding", "delivered"), [("float16", "float32"), ("bfloat16", "float32"), ("int8", "float32"),
                                                     ("bfloat16", "float16"), ("int8", "float16")])
def test_a_pool_matrix_is_decoded_in_its_own_map(encoding: str, delivered: str) -> None:
    """The host decode needs no second matrix: the pool maps a matrix at the larger of its held and
    delivered bytes and the decode writes the delivered rows there (last row first when they widen),
    through chunks smaller than the matrix."""
    words, extra = words_of(encoding, 129, seed=2)
    fmt = RowFormat(dim=129, stored=np.dtype(WORDS[encoding]), encoding=encoding, **extra).delivering(delivered)
    pool = BatchMemory(1 << 24, 1, budget=None, dtype=fmt.held, room=fmt.delivered.itemsize)
    held = pool.matrix(MatrixLease(pool, 0), N, 129)
    held[...] = words
    decoder = RowDecoder(fmt)
    decoder_chunk = 4096  # bytes: several chunks over a 300-row matrix
    import outre_async.features._decode as D

    old, D.DECODE_CHUNK_BYTES = D.DECODE_CHUNK_BYTES, decoder_chunk
    try:
        x = decoder.decode_matrix(held)
    finally:
        D.DECODE_CHUNK_BYTES = old
    assert x.base is held.base and room_of(held, x.nbytes) is not None  # the same map
    np.testing.assert_array_equal(x.view(np.uint8), reference(encoding, words, extra, delivered).view(np.uint8))
    fresh = np.array(words)  # not a pool matrix: decoded into a new array, the words left as they were
    y = decoder.decode_matrix(fresh)
    assert not np.shares_memory(y, fresh) and np.array_equal(fresh, words)


def test_tiers_refuse_rows_in_other_words() -> None:
    words, _ = words_of("float16", 8)
    source = MemorySource(words)
    tier = SourceTier(source)
    assert tier.held == np.float16
    with pytest.raises(oa.ConfigError, match=r"out must be a float16 ndarray of shape \(3, 8\) \(the rows' held words\)"):
        run(tier.read_rows(np.arange(3), np.empty((3, 8), np.float32)))
    with pytest.raises(oa.ConfigError, match="feature buffer holds float32 rows, its fallback float16"):
        make_tier("buffer", tier, buffer=FeatureBuffer(N, 8, 8))
    with pytest.raises(oa.ConfigError, match="static cache holds float32 rows, its fallback float16"):
        make_tier("static", tier, cache=StaticFeatureCache(np.arange(3), N, 8))
    buffer = FeatureBuffer(N, 8, 8, held=np.float16)
    with pytest.raises(oa.ConfigError, match="go to a float16 matrix"):
        run(buffer.extract(np.arange(3), np.empty((3, 8), np.float32), tier))
    with pytest.raises(oa.ConfigError, match="held as float64 are not supported"):
        FeatureBuffer(N, 8, 8, held=np.float64)
