# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Read and write safetensors checkpoint directories (Hugging Face Llama layout).

A checkpoint directory holds ``config.json`` and one or more ``*.safetensors`` files (sharded
ones listed by ``model.safetensors.index.json``, or simply every ``*.safetensors`` file). The
safetensors format is small enough to read here without the ``safetensors`` package (which
the development venv lacks; the GPU machine has it): 8 bytes little-endian header length, a
JSON header ``{name: {dtype, shape, data_offsets: [begin, end]}}`` (plus ``__metadata__``),
then the raw little-endian tensor bytes. Files are memory-mapped, so a tensor is read from
disk when it is moved to the device, one layer at a time (:func:`decoder.decoder_from_weights`).
"""

from __future__ import annotations

import json
import struct
import warnings
from pathlib import Path

import numpy as np
import torch

from edge_loop.reasoning.decoder import Decoder, DecoderConfig, decoder_from_weights

_DTYPES = {
    'F32': torch.float32, 'F16': torch.float16, 'BF16': torch.bfloat16, 'F64': torch.float64,
    'I64': torch.int64, 'I32': torch.int32, 'I16': torch.int16, 'I8': torch.int8,
    'U8': torch.uint8, 'BOOL': torch.bool,
}
_NAMES = {v: k for k, v in _DTYPES.items()}
MAX_HEADER_BYTES = 100_000_000


class CheckpointError(ValueError):
    """A checkpoint file or directory that cannot be read; the message names it."""


def read_safetensors(path: str | Path) -> dict[str, torch.Tensor]:
    """Every tensor of one ``.safetensors`` file, as CPU tensors on a read-only memory map."""
    path = Path(path)
    raw = np.memmap(path, dtype=np.uint8, mode='r')
    if raw.size < 8:
        raise CheckpointError(f'{path}: {raw.size} bytes, too short for a safetensors file')
    (header_len,) = struct.unpack('<Q', raw[:8].tobytes())
    if header_len > min(MAX_HEADER_BYTES, raw.size - 8):
        raise CheckpointError(f'{path}: header length {header_len} does not fit the file')
    try:
        header = json.loads(raw[8:8 + header_len].tobytes())
    except ValueError as exc:
        raise CheckpointError(f'{path}: header is not JSON ({exc})') from exc
    body = 8 + header_len
    out = {}
    for name, info in header.items():
        if name == '__metadata__':
            continue
        dtype = _DTYPES.get(info.get('dtype'))
        if dtype is None:
            raise CheckpointError(f'{path}: tensor {name!r} has dtype {info.get("dtype")!r}')
        begin, end = info['data_offsets']
        shape = tuple(info['shape'])
        n_bytes = int(np.prod(shape, dtype=np.int64)) * torch.empty(0, dtype=dtype
                                                                    ).element_size()
        if end - begin != n_bytes or body + end > raw.size:
            raise CheckpointError(f'{path}: tensor {name!r} {shape} {info["dtype"]} has '
                                  f'offsets {begin}..{end}, file has {raw.size} bytes')
        chunk = raw[body + begin:body + end]
        # frombuffer warns that the map is read-only; these tensors are never written
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', UserWarning)
            flat = (torch.frombuffer(memoryview(chunk), dtype=torch.uint8) if n_bytes
                    else torch.empty(0, dtype=torch.uint8))
        out[name] = flat.view(dtype).reshape(shape)
    return out


def write_safetensors(path: str | Path, tensors: dict[str, torch.Tensor],
                      metadata: dict[str, str] | None = None) -> None:
    """Write ``tensors`` (CPU, contiguous) as one ``.safetensors`` file."""
    header: dict[str, object] = {}
    if metadata:
        header['__metadata__'] = dict(metadata)
    offset = 0
    blobs = []
    for name, t in tensors.items():
        t = t.detach().to('cpu').contiguous()
        data = t.view(torch.uint8).numpy().tobytes() if t.numel() else b''
        header[name] = {'dtype': _NAMES[t.dtype], 'shape': list(t.shape),
                        'data_offsets': [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(',', ':')).encode()
    text += b' ' * (-len(text) % 8)   # the format pads the header to 8 bytes
    with open(path, 'wb') as fh:
        fh.write(struct.pack('<Q', len(text)))
        fh.write(text)
        for blob in blobs:
            fh.write(blob)


def checkpoint_files(directory: str | Path) -> list[Path]:
    """The ``.safetensors`` files of a checkpoint directory (index order when indexed)."""
    directory = Path(directory)
    index = directory / 'model.safetensors.index.json'
    if index.exists():
        weight_map = json.loads(index.read_text()).get('weight_map', {})
        files = sorted(set(weight_map.values()))
        return [directory / f for f in files]
    files = sorted(directory.glob('*.safetensors'))
    if not files:
        raise CheckpointError(f'{directory}: no *.safetensors files')
    return files


def load_checkpoint(directory: str | Path, *, fmt: str = 'fp16', context: int = 1024,
                    device: torch.device | str = 'cpu',
                    dtype: torch.dtype = torch.float16) -> Decoder:
    """Build a :class:`Decoder` from a checkpoint directory (``config.json`` + safetensors)."""
    directory = Path(directory)
    config = directory / 'config.json'
    if not config.exists():
        raise CheckpointError(f'{directory}: no config.json')
    cfg = DecoderConfig.from_json(config)
    weights: dict[str, torch.Tensor] = {}
    for f in checkpoint_files(directory):
        weights.update(read_safetensors(f))
    try:
        return decoder_from_weights(cfg, weights, fmt=fmt, context=context, device=device,
                                    dtype=dtype)
    except KeyError as exc:
        raise CheckpointError(f'{directory}: tensor {exc} missing') from exc


def save_checkpoint(directory: str | Path, cfg: DecoderConfig,
                    tensors: dict[str, torch.Tensor]) -> None:
    """Write ``config.json`` and ``model.safetensors`` (tests build tiny checkpoints so)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / 'config.json').write_text(cfg.to_json())
    write_safetensors(directory / 'model.safetensors', tensors, {'format': 'pt'})


def random_llama_tensors(cfg: DecoderConfig, seed: int = 0,
                         dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
    """Random dense tensors under Hugging Face Llama names (for tests and examples)."""
    gen = torch.Generator().manual_seed(seed)
    h, kv, inter = cfg.hidden_size, cfg.num_key_value_heads * cfg.head_dim, cfg.intermediate_size

    def rnd(*shape: int, std: float = 0.05) -> torch.Tensor:
        return (torch.randn(*shape, generator=gen) * std).to(dtype)

    out = {'model.embed_tokens.weight': rnd(cfg.vocab_size, h, std=1.0),
           'model.norm.weight': 1.0 + rnd(h), 'lm_head.weight': rnd(cfg.vocab_size, h)}
    for i in range(cfg.num_hidden_layers):
        p = f'model.layers.{i}.'
        out.update({
            p + 'input_layernorm.weight': 1.0 + rnd(h),
            p + 'post_attention_layernorm.weight': 1.0 + rnd(h),
            p + 'self_attn.q_proj.weight': rnd(h, h), p + 'self_attn.k_proj.weight': rnd(kv, h),
            p + 'self_attn.v_proj.weight': rnd(kv, h), p + 'self_attn.o_proj.weight': rnd(h, h),
            p + 'mlp.gate_proj.weight': rnd(inter, h), p + 'mlp.up_proj.weight': rnd(inter, h),
            p + 'mlp.down_proj.weight': rnd(h, inter)})
    return out
