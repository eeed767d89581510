# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Item 6's handoff: what moving one frame's inputs to a stage's device costs on this host.

A stage whose ``device`` parameter puts it off the CPU receives each frame as a view on the
shared-memory sample and hands its planes to the device (``edge_loop.kernels.gpu.transfer``:
the torch stages copy from the host view, the ``pageable`` method). The check times exactly
that, on the device the running node resolved and at the frame size the camera sent, in
the check's own process: the planes each stage uploads (:data:`STAGE_PLANES`) copied to the
device and synchronised, ``repeats`` times after a warm-up. The figure is per frame, for
every plane of the stage together; the kernels' own time is item 1's.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

# What a frame stage moves to its device per frame (dtype, channels): colour and depth (the
# locator), except the stages below: the grasp planner depth and the locator's label image,
# the occupancy mapper depth only. (Stage names are listed in edge_loop/stages.py only.)
PLANE_FORMATS = {'color': (np.uint8, 3), 'depth': (np.uint16, 1), 'labels': (np.uint8, 1)}
DEFAULT_PLANES = ('color', 'depth')
STAGE_PLANES = {'grasp_planner': ('depth', 'labels'), 'occupancy_mapper': ('depth',)}
REPEATS = 50


@dataclass(frozen=True)
class HandoffTime:
    """Per-frame handoff of one stage: p50/p99 ms over ``repeats`` frames, what moved."""

    device: str
    p50_ms: float
    p99_ms: float
    repeats: int
    nbytes: int
    method: str = 'pageable'

    def describe(self) -> str:
        """One line for the page."""
        return (f'{self.device}: handoff p50 {self.p50_ms:.2f} / p99 {self.p99_ms:.2f} ms per '
                f'frame ({self.nbytes / 2**20:.2f} MiB, {self.method}, {self.repeats} frames)')


def stage_planes(stage: str, width: int, height: int) -> list[np.ndarray]:
    """Host arrays shaped as the planes ``stage`` uploads per frame at ``width`` x ``height``."""
    rng = np.random.default_rng(0)
    out = []
    for plane in STAGE_PLANES.get(stage, DEFAULT_PLANES):
        dtype, channels = PLANE_FORMATS[plane]
        shape = (height, width, channels) if channels > 1 else (height, width)
        out.append(rng.integers(0, np.iinfo(dtype).max, size=shape, dtype=dtype))
    return out


def measure_handoff(device: str, planes: list[np.ndarray], repeats: int = REPEATS
                    ) -> HandoffTime:
    """Time copying ``planes`` from host memory to ``device`` (synchronised), per frame.

    Raises RuntimeError (torch missing, device unusable) with the reason for the page.
    """
    try:
        import torch

        from edge_loop.kernels.gpu.transfer import Handoff
    except ImportError as exc:
        raise RuntimeError(f'torch is needed to measure a handoff: {exc}') from exc
    dev = torch.device(device)
    handoff = Handoff(dev, 'pageable')

    def sync() -> None:
        if dev.type == 'cuda':
            torch.cuda.synchronize(dev)

    try:
        for _ in range(3):
            [handoff.to_device(p) for p in planes]
        sync()
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            [handoff.to_device(p) for p in planes]
            sync()
            times.append((time.perf_counter() - t0) * 1e3)
    finally:
        handoff.close()
    a = np.asarray(times)
    return HandoffTime(str(dev), float(np.median(a)), float(np.percentile(a, 99)), repeats,
                       sum(int(p.nbytes) for p in planes))


def measure_stages(devices: Mapping[str, str], width: int, height: int,
                   repeats: int = REPEATS) -> tuple[dict[str, HandoffTime], dict[str, str]]:
    """Handoffs of the stages placed off the CPU: (measured, {stage: why not measured}).

    ``devices`` maps stage -> the device the running node resolved (``cpu`` stages are
    skipped: they read the shared-memory frame in place).
    """
    measured: dict[str, HandoffTime] = {}
    failed: dict[str, str] = {}
    for stage, device in devices.items():
        if device == 'cpu':
            continue
        try:
            measured[stage] = measure_handoff(device, stage_planes(stage, width, height),
                                              repeats)
        except Exception as exc:  # noqa: BLE001 - e.g. torch without CUDA raises AssertionError
            failed[stage] = f'{type(exc).__name__}: {exc}'
    return measured, failed
