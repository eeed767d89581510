# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""segnet on an accelerator: the torch module on a device, and ONNX Runtime with providers.

Both read the one shipped copy of the weights (``edge_loop/models/segnet.onnx``). The torch
path runs the training code's module on any ``torch.device`` in float32, float16 or bfloat16;
the ONNX path takes an execution-provider list (:func:`edge_loop.placement.ort_providers`), so
CUDA, ROCm, or an NPU's provider (Vitis AI on a Ryzen AI part) is a configuration change.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from edge_loop.kernels.gpu.graphs import GraphCache
from edge_loop.models import segnet
from edge_loop.placement import ort_provider_options, ort_providers

_MODELS: dict[tuple, Any] = {}
_SESSIONS: dict[tuple, Any] = {}


def torch_segnet(device: str | torch.device, dtype: torch.dtype = torch.float32) -> Any:
    """The segnet module on ``device`` in ``dtype`` (eval mode, cached)."""
    dev = torch.device(device)
    key = (str(dev), dtype)
    if key not in _MODELS:
        base = segnet.torch_model_from_onnx(segnet.ONNX_PATH)
        _MODELS[key] = copy.deepcopy(base).to(device=dev, dtype=dtype).eval()
    return _MODELS[key]


def segnet_torch_on(device: str | torch.device, dtype: torch.dtype = torch.float32
                    ) -> Callable[[dict[str, np.ndarray]], list[np.ndarray]]:
    """``inputs -> [logits]`` (the ONNX op's signature) through the torch module on a device.

    The input goes over in float32 and is rounded to ``dtype`` there; the logits come back as
    float32 (1, 2, 60, 80): 38 kB, not an image.
    """
    dev = torch.device(device)
    graphs = GraphCache(dev)

    def forward(inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        model = torch_segnet(dev, dtype)
        x = torch.from_numpy(np.ascontiguousarray(inputs[segnet.SEGNET_INPUT], np.float32))

        def make():
            return lambda t: model(t.to(dtype)).to(torch.float32)

        # float32 means float32: cuDNN would otherwise round the convolutions' inputs to
        # TF32 (10-bit mantissa) on Ampere and later, an error the float32 gate does not allow
        with torch.inference_mode(), torch.backends.cudnn.flags(
                enabled=True, allow_tf32=False):
            out = graphs.run((dtype,), make, x)
        return [out.cpu().numpy()]

    forward.__name__ = f'segnet_torch_{dev.type}_{str(dtype).removeprefix("torch.")}'
    return forward


def ort_session(device: str, providers: str | list[str] = '') -> tuple[Any, list[str]]:
    """(InferenceSession of segnet, providers it actually runs on) for a device or a list."""
    import onnxruntime as ort

    chosen, _ = ort_providers(device, providers)
    key = (device, tuple(chosen))
    if key not in _SESSIONS:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        _SESSIONS[key] = ort.InferenceSession(
            str(segnet.ONNX_PATH), opts, providers=chosen,
            provider_options=ort_provider_options(chosen, device))
    session = _SESSIONS[key]
    return session, list(session.get_providers())


def segnet_ort_on(device: str, providers: str | list[str] = ''
                  ) -> Callable[[dict[str, np.ndarray]], list[np.ndarray]]:
    """``inputs -> [logits]`` through ONNX Runtime on the providers the device asks for."""

    def forward(inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        session, _ = ort_session(device, providers)
        return session.run(None, {segnet.SEGNET_INPUT: np.ascontiguousarray(
            inputs[segnet.SEGNET_INPUT], np.float32)})

    forward.__name__ = f'segnet_ort_{device.replace(":", "")}'
    return forward
