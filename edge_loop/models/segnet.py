# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""segnet: a tiny fully-convolutional object-foreground net for the object locator.

Input (``SEGNET_INPUT``, float32 ``(1, 5, 120, 160)``, any camera resolution is resampled to
it with area averaging):

- channels 0-2: RGB / 255 - 0.5;
- channel 3: height above the table (world z from aligned depth and extrinsics) / 5 cm,
  clipped to [-1, 4], the mean over the valid depth pixels of each cell, 0 where none;
- channel 4: fraction of the cell's pixels with valid depth (0 in holes and glare).

Output (``SEGNET_OUTPUT``, float32 ``(1, 2, 60, 80)``, one cell = 8x8 VGA pixels: a
stride-2 stem keeps it fast), two logits per cell:

- channel 0 (``FOREGROUND``): the cell is on an object;
- channel 1 (``CONTACT``): two different objects touch in the cell (an instance boundary).

The locator (:func:`edge_loop.kernels.object_locator.locate_objects_fused`) uses channel 0
only where depth fails (to connect depth segments across holes) and channel 1 to re-join the
pieces its colour rule split off one object (where no contact is predicted between them).

Runtime (:class:`SegNet`) needs only numpy, OpenCV and onnxruntime (one thread). The torch
module (:func:`build_torch_model`) is for training and the torch-vs-ONNX gate.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

# The input layout lives with the kernel that builds it (kernels never import models).
from edge_loop.kernels.object_locator.model_inputs import (  # noqa: F401 - re-exported
    HEIGHT_CLIP,
    HEIGHT_SCALE,
    INPUT_H,
    INPUT_W,
    prepare_inputs,
)

MODEL_DIR = Path(__file__).resolve().parent
ONNX_PATH = MODEL_DIR / 'segnet.onnx'
META_PATH = MODEL_DIR / 'segnet.json'
FOREGROUND, CONTACT = 0, 1
OUTPUT_W, OUTPUT_H = 80, 60
SEGNET_INPUT = 'rgbd'
SEGNET_OUTPUT = 'logit'


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class SegNet:
    """ONNX Runtime session of segnet (CPU, one thread) with pre- and post-processing."""

    def __init__(self, onnx_path: str | Path = ONNX_PATH, threads: int = 1,
                 providers: tuple[str, ...] = ('CPUExecutionProvider',),
                 provider_options: tuple[dict[str, str], ...] | None = None) -> None:
        """Load the model; raises FileNotFoundError when the file is missing.

        ``providers``: ONNX Runtime execution providers in priority order
        (:func:`edge_loop.placement.ort_providers` makes the list from a node's parameters).
        """
        import onnxruntime as ort

        self.path = Path(onnx_path)
        if not self.path.exists():
            raise FileNotFoundError(f'segnet model {self.path} not found (make train)')
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        self.session = ort.InferenceSession(
            str(self.path), opts, providers=list(providers),
            provider_options=None if provider_options is None else list(provider_options))
        self.providers = list(self.session.get_providers())

    def logits(self, inputs: np.ndarray) -> np.ndarray:
        """(2, 60, 80) float32 logits (foreground, contact) of one prepared input."""
        return self.session.run(None, {SEGNET_INPUT: inputs})[0][0]


_LOADED: dict[tuple, SegNet] = {}


def load_segnet(onnx_path: str | Path = ONNX_PATH,
                providers: tuple[str, ...] = ('CPUExecutionProvider',),
                provider_options: tuple[dict[str, str], ...] | None = None) -> SegNet:
    """A cached :class:`SegNet` for ``onnx_path`` on ``providers``."""
    key = (str(Path(onnx_path).resolve()), tuple(providers),
           repr(provider_options))
    if key not in _LOADED:
        _LOADED[key] = SegNet(onnx_path, providers=tuple(providers),
                              provider_options=provider_options)
    return _LOADED[key]


def load_meta(meta_path: str | Path = META_PATH) -> dict[str, Any]:
    """The training record written next to the ONNX file."""
    return json.loads(Path(meta_path).read_text())


def build_torch_model() -> Any:
    """The torch module (``torch`` imported here: the runtime does not need it).

    Stem (stride 2, 80x60) -> down (stride 2, 40x30) -> three dilated 3x3 convs (context of
    ~1/3 of the image, to extend objects into depth holes) -> nearest upsample, concatenate
    the stem features -> 3x3 conv -> 1x1 logits (foreground, contact) at 80x60. ~43k
    parameters.
    """
    import torch
    from torch import nn

    class SegNetModule(nn.Module):
        """See :func:`build_torch_model`."""

        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(5, 16, 3, 2, 1), nn.ReLU(),
                                      nn.Conv2d(16, 16, 3, 1, 1), nn.ReLU())
            self.down = nn.Sequential(
                nn.Conv2d(16, 32, 3, 2, 1), nn.ReLU(),
                nn.Conv2d(32, 32, 3, 1, 2, dilation=2), nn.ReLU(),
                nn.Conv2d(32, 32, 3, 1, 4, dilation=4), nn.ReLU(),
                nn.Conv2d(32, 32, 3, 1, 8, dilation=8), nn.ReLU())
            self.up = nn.Upsample(scale_factor=2, mode='nearest')
            self.fuse = nn.Sequential(nn.Conv2d(48, 16, 3, 1, 1), nn.ReLU())
            self.head = nn.Conv2d(16, 2, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            s = self.stem(x)
            d = self.up(self.down(s))
            return self.head(self.fuse(torch.cat([s, d], dim=1)))

    return SegNetModule()


def torch_forward(inputs: dict[str, np.ndarray], state_path: str | Path | None = None
                  ) -> list[np.ndarray]:
    """Run the torch module with the weights stored in the ONNX file (for the harness)."""
    import torch

    model = torch_model_from_onnx(state_path or ONNX_PATH)
    with torch.no_grad():
        out = model(torch.from_numpy(np.ascontiguousarray(inputs[SEGNET_INPUT])))
    return [out.numpy()]


_TORCH_CACHE: dict[str, Any] = {}


def torch_model_from_onnx(onnx_path: str | Path) -> Any:
    """The torch module with its weights read back from the ONNX initialisers.

    The ONNX file is the single shipped copy of the weights; loading them into the training
    code's module checks the export (graph and weights) against the module's forward.
    """
    import onnx
    import torch
    from onnx import numpy_helper

    key = f'{Path(onnx_path).resolve()}:{Path(onnx_path).stat().st_mtime_ns}'
    if key in _TORCH_CACHE:
        return _TORCH_CACHE[key]
    graph = onnx.load(str(onnx_path)).graph
    weights = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    model = build_torch_model()
    state = model.state_dict()
    missing = [k for k in state if k not in weights]
    if missing:
        raise ValueError(f'{onnx_path}: initialisers missing for {missing[:3]}')
    model.load_state_dict({k: torch.from_numpy(weights[k].copy()) for k in state})
    model.eval()
    _TORCH_CACHE[key] = model
    return model
