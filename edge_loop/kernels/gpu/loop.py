# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""One GPU-placed step of the loop's per-frame work, for the bench, the copy audit and issue 32.

:func:`gpu_loop_step` runs, on the device the frame tensors live on, everything per pixel the
stages do with one RGB-D frame: the locator's height/foreground/cut masks, the occupancy
update, and (given the target's points from the locator's CPU tail) the grasp-candidate
scoring. It allocates only what torch's caching allocator hands back frame after frame, so
a memory pool can wrap it as it is. It runs eager (one launch per kernel): the copy audit
uses it to count transfers; for time, each stage's graphed path (``TorchOccupancyMapper``,
``GraphCache`` around ``pixel_masks``/``candidate_table``, see ``bench/placement.py``) is
3-8x faster at VGA on the H200.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from edge_loop.kernels.camera import Extrinsics, Intrinsics
from edge_loop.kernels.gpu.grasp import obstacle_points, score_candidates
from edge_loop.kernels.gpu.locator import DEFAULT_LOCATOR, pack_mask, pixel_masks
from edge_loop.kernels.gpu.occupancy import TorchOccupancyMapper
from edge_loop.kernels.gpu.transfer import Handoff
from edge_loop.kernels.grasp_planner import DEFAULT_GRASP_PARAMS, GraspParams
from edge_loop.kernels.grasp_types import PlanarGrasp
from edge_loop.kernels.object_locator import LocatorParams


@dataclass
class LoopStepResult:
    """What one step leaves on the device, and what it brought back to the host."""

    grid: torch.Tensor            # (rows, cols) int8 occupancy grid (device)
    fg_bits: torch.Tensor         # packed foreground mask (device, np.packbits order)
    cut_bits: torch.Tensor        # packed cut mask (device)
    grasps: list[PlanarGrasp]     # ranked grasps for the given target ([] without one)
    host: dict[str, np.ndarray]   # grid / fg_bits / cut_bits on the host (when asked)


def gpu_loop_step(frame_tensors: dict[str, torch.Tensor], intr: Intrinsics, ext: Extrinsics,
                  mapper: TorchOccupancyMapper, *,
                  target_points: torch.Tensor | None = None,
                  locator_params: LocatorParams = DEFAULT_LOCATOR,
                  grasp_params: GraspParams = DEFAULT_GRASP_PARAMS,
                  dtype: torch.dtype = torch.float32,
                  handoff: Handoff | None = None) -> LoopStepResult:
    """One frame's per-pixel work of the locator, occupancy mapper and grasp scorer on a device.

    Args:
        frame_tensors: ``{'color': (H, W, 3) uint8, 'depth': (H, W) int16/uint16 mm or
            float32 m}``, already on the device (see :class:`~.transfer.Handoff` for the
            ways to put them there; ``'color'`` may be absent: no colour cuts).
        intr, ext: the frame's camera.
        mapper: holds the occupancy log-odds on the device between frames (its device must
            be the frame's).
        target_points: (N, 3) float32 world points of the object to grasp (the locator's CPU
            tail finds it), or None to skip grasp scoring.
        locator_params, grasp_params: as the CPU stages take them.
        dtype: colour-arithmetic precision (locator) and coordinate precision (grasps);
            ``float32``, or ``float16``/``bfloat16`` where the gates pass them.
        handoff: when given, the step brings the occupancy grid and the two packed masks back
            to the host through it (counted in its ledger): the only device-to-host traffic
            of a frame, none of it an image.

    Returns:
        :class:`LoopStepResult`.

    """
    depth = frame_tensors['depth']
    color = frame_tensors.get('color')
    masks = pixel_masks(color, depth, intr, ext, locator_params, dtype)
    grid = mapper.update_tensor(depth, intr, ext)
    fg_bits, cut_bits = pack_mask(masks.fg), pack_mask(masks.cut)
    grasps: list[PlanarGrasp] = []
    if target_points is not None:
        obstacles = obstacle_points(depth, intr, ext, grasp_params)
        grasps = score_candidates(target_points, obstacles, grasp_params, dtype)
    host: dict[str, np.ndarray] = {}
    if handoff is not None:
        host = {'grid': handoff.to_host(grid, 'grid'),
                'fg_bits': handoff.to_host(fg_bits, 'mask bits'),
                'cut_bits': handoff.to_host(cut_bits, 'mask bits')}
    return LoopStepResult(grid, fg_bits, cut_bits, grasps, host)
