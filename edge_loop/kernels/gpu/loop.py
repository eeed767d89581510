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
from edge_loop.kernels.gpu.grasp import candidate_table, obstacle_points, score_candidates
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


GRAPHED_STAGES = ('locator', 'occupancy', 'grasp', 'segnet')


def segnet_input_t(color: torch.Tensor | None, height: torch.Tensor) -> torch.Tensor:
    """``model_inputs.prepare_inputs`` on the device: the net's (1, 5, 120, 160) float32 input.

    ``height``: the (H, W) world-z image :func:`pixel_masks` leaves on the device (NaN where
    depth is invalid). Area resampling is ``adaptive_avg_pool2d`` (OpenCV's INTER_AREA for an
    integer factor, VGA -> 160x120 is 4x4); the colour is rounded to uint8 after the
    resampling as OpenCV does.
    """
    from edge_loop.kernels.object_locator.model_inputs import (
        HEIGHT_CLIP,
        HEIGHT_SCALE,
        INPUT_H,
        INPUT_W,
    )

    size = (INPUT_H, INPUT_W)
    valid = torch.isfinite(height)
    h = torch.where(valid, (height / np.float32(HEIGHT_SCALE)).clamp(*HEIGHT_CLIP),
                    torch.zeros_like(height))
    pooled = torch.nn.functional.adaptive_avg_pool2d(
        torch.stack([valid.to(torch.float32), h.to(torch.float32)]).unsqueeze(0), size)[0]
    valid_lr, hsum_lr = pooled[0], pooled[1]
    h_lr = torch.where(valid_lr > 1e-6, hsum_lr / valid_lr.clamp_min(1e-6),
                       torch.zeros_like(hsum_lr))
    if color is None:
        rgb = torch.zeros((3, *size), dtype=torch.float32, device=height.device)
    else:
        planes = color.permute(2, 0, 1).to(torch.float32).unsqueeze(0)
        rgb = torch.nn.functional.adaptive_avg_pool2d(planes, size)[0].round()
        rgb = rgb * np.float32(1 / 255) - 0.5
    return torch.cat([rgb, h_lr.unsqueeze(0), valid_lr.unsqueeze(0)]).unsqueeze(0)


class GraphedLoopStep:
    """The loop's GPU stages for one camera, each captured as a CUDA graph when it is built.

    Per frame: the frame's colour and depth and the target's point block go host -> device
    once each (into static buffers every stage graph reads: one upload per input, however
    many stages use it), the four stage graphs replay (``locator``: height/foreground/cut
    masks, packed; ``occupancy``: the log-odds update and grid, state kept on the device;
    ``grasp``: obstacle points and the candidate table of the target; ``segnet``: its input
    built on the device from colour and height, then the net), and only small results come
    back (grid 10.8 kB, two packed masks, the candidate table, segnet logits): no image.

    Everything a frame touches is allocated here, before the first frame: warm-up and
    capture happen in the constructor (so no graph is ever captured while another thread
    launches work), and a frame allocates nothing (``torch.cuda.memory_stats`` counters).
    On the CPU the same functions run eagerly on the same buffers (CI's path).

    Args:
        device: where the stages run.
        intr, ext: the camera (one graph set per camera).
        segnet_model: a torch module (``gpu.segnet.torch_segnet``) or None (no segnet stage).
        dtype: colour/coordinate precision of the locator and grasp stages.
        ledger: counts the transfers (``transfer.CopyLedger``).
        priority: CUDA stream priority the graphs are captured with (lower = higher; a
            captured kernel keeps its capture stream's priority, whatever stream replays it).
        compile_mode: hand the occupancy and grasp stages to ``torch.compile`` in this mode
            (``graphs.COMPILE_MODES``) before their capture: fused kernels, fewer launches.
            The locator masks stay eager inside their graph (Dynamo fails on their host-side
            table lookups, torch 2.11), segnet too (one convolution net, already few kernels).

    """

    def __init__(self, device: str | torch.device, intr: Intrinsics, ext: Extrinsics, *,
                 segnet_model: torch.nn.Module | None = None,
                 locator_params: LocatorParams = DEFAULT_LOCATOR,
                 grasp_params: GraspParams = DEFAULT_GRASP_PARAMS,
                 dtype: torch.dtype = torch.float32, ledger=None, warmup: int = 3,
                 priority: int = 0, compile_mode: str | None = None) -> None:
        from edge_loop.kernels.gpu.graphs import compiled
        from edge_loop.kernels.gpu.grasp import obstacle_points_on, offsets_on
        from edge_loop.kernels.gpu.locator import world_rays_t
        from edge_loop.kernels.gpu.occupancy import (
            DEFAULT_GRID,
            DEFAULT_PARAMS,
            checked_rays,
        )
        from edge_loop.kernels.gpu.transfer import CopyLedger
        from edge_loop.kernels.occupancy import OCC_UNKNOWN

        self.device = dev = torch.device(device)
        self.intr, self.ext = intr, ext
        self.ledger = ledger if ledger is not None else CopyLedger()
        self.grasp_params = gp = grasp_params
        self.cuda = dev.type == 'cuda'
        self.priority = priority
        self.stage_names = tuple(s for s in GRAPHED_STAGES
                                 if s != 'segnet' or segnet_model is not None)
        h, w = intr.height, intr.width
        pin = self.cuda
        # host side: the frame slot (pinned on a GPU: the DMA reads it directly)
        self.host_in = {
            'color': torch.zeros((h, w, 3), dtype=torch.uint8, pin_memory=pin),
            'depth': torch.zeros((h, w), dtype=torch.int16, pin_memory=pin),
            'target': torch.full((gp.max_target_points, 3), float('nan'),
                                 dtype=torch.float32, pin_memory=pin),
            'centroid': torch.zeros(2, dtype=torch.float64, pin_memory=pin)}
        self.has_target = False
        with torch.no_grad():
            self.dev_in = {k: torch.zeros_like(v, device=dev) for k, v in self.host_in.items()}
            self.dev_in['target'].fill_(float('nan'))
            spec, params = DEFAULT_GRID, DEFAULT_PARAMS
            self.logodds = torch.zeros(spec.shape, dtype=torch.float32, device=dev)
            self.grid_prev = torch.full(spec.shape, OCC_UNKNOWN, dtype=torch.int8,
                                        device=dev)
            occ_rays = checked_rays((h, w), intr, ext, spec, params, dev, torch.float32)
            rays, origin = world_rays_t(intr, ext, dev)
            offs = offsets_on(gp.offsets, dev)
        d_in = self.dev_in

        def locator():
            m = pixel_masks(d_in['color'], d_in['depth'], intr, ext, locator_params, dtype)
            return m.height, pack_mask(m.fg), pack_mask(m.cut)

        from edge_loop.kernels.gpu.occupancy import (
            cell_areas_on,
            occupancy_grid_torch,
            update_logodds,
        )

        def occupancy_update(depth, logodds, grid_prev):
            new = update_logodds(logodds, *cell_areas_on(depth, occ_rays, spec, params), params)
            return new, occupancy_grid_torch(new, params, grid_prev)

        def grasp_table(depth, target, centroid):
            obstacles = obstacle_points_on(depth, rays, origin, gp)
            return candidate_table(target, centroid, obstacles, gp, dtype, offs)

        # pure functions of their tensors (the state is copied back outside): what
        # torch.compile traces best
        occupancy_update = compiled(occupancy_update, compile_mode)
        grasp_table = compiled(grasp_table, compile_mode)

        def occupancy():
            new, grid = occupancy_update(d_in['depth'], self.logodds, self.grid_prev)
            self.logodds.copy_(new)
            self.grid_prev.copy_(grid)
            return (grid,)

        def grasp():
            return (grasp_table(d_in['depth'], d_in['target'], d_in['centroid']),)

        def segnet():
            x = segnet_input_t(d_in['color'], self.out['locator'][0])
            p = next(segnet_model.parameters())
            return (segnet_model(x.to(p.dtype)).to(torch.float32),)

        self._fns = {'locator': locator, 'occupancy': occupancy, 'grasp': grasp,
                     'segnet': segnet}
        self.out: dict[str, tuple[torch.Tensor, ...]] = {}
        self.graphs: dict[str, object] = {}
        with torch.no_grad(), torch.backends.cudnn.flags(enabled=True,
                                                                allow_tf32=False):
            if self.cuda:
                self._capture(warmup)
            else:
                self._run_stages()
            # state back to "nothing seen" after the warm-up frames
            self.logodds.zero_()
            self.grid_prev.fill_(OCC_UNKNOWN)
            self.host_out = {name: torch.empty(t.shape, dtype=t.dtype, pin_memory=pin)
                             for name, t in self._downloads().items()}
        self.grasps: list[PlanarGrasp] = []

    def _capture(self, warmup: int) -> None:
        from edge_loop.kernels.gpu.graphs import _KEEPALIVE

        side = torch.cuda.Stream(device=self.device, priority=self.priority)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):   # warm-up off the default stream, as torch advises
            for _ in range(warmup):
                self._run_stages()
        torch.cuda.current_stream(self.device).wait_stream(side)
        torch.cuda.synchronize(self.device)
        for name in self.stage_names:
            graph = torch.cuda.CUDAGraph()
            # thread_local: a thread of this process that launches work meanwhile (a
            # decoder) does not invalidate this capture
            with torch.cuda.graph(graph, stream=side, capture_error_mode='thread_local'):
                self.out[name] = self._fns[name]()
            self.graphs[name] = graph
        torch.cuda.synchronize(self.device)
        # a graph replays raw addresses: hold every cached table its kernels read
        self._held = [dict(cache) for cache in _KEEPALIVE]

    def _run_stages(self) -> None:
        for name in self.stage_names:
            self.out[name] = self._fns[name]()

    def _downloads(self) -> dict[str, torch.Tensor]:
        """The results that come back to the host each frame (none of them an image)."""
        out = {'grid': self.out['occupancy'][0], 'fg_bits': self.out['locator'][1],
               'cut_bits': self.out['locator'][2], 'grasp_table': self.out['grasp'][0]}
        if 'segnet' in self.out:
            out['segnet_logits'] = self.out['segnet'][0]
        return out

    def load(self, color: np.ndarray, depth: np.ndarray,
             target_points: np.ndarray | None = None) -> None:
        """Write one frame (and the target's points) into the host slot (the transport's job).

        ``depth``: 16-bit mm (uint16 or int16 bits); ``target_points``: (N, 3) world points of
        the locator's chosen object, or None (the grasp stage then scores an empty block).
        """
        from edge_loop.kernels.gpu.grasp import target_block

        self.host_in['color'].numpy()[...] = color
        self.host_in['depth'].numpy()[...] = np.asarray(depth).view(np.int16)
        if target_points is not None and len(target_points):
            block, centroid = target_block(target_points, self.grasp_params)
            self.host_in['target'].numpy()[...] = block
            self.host_in['centroid'].numpy()[...] = centroid
            self.has_target = True
        else:
            self.host_in['target'].fill_(float('nan'))
            self.has_target = False

    def upload(self) -> None:
        """Host slot -> device buffers: one transfer per input."""
        for name, host in self.host_in.items():
            if self.cuda:
                self.dev_in[name].copy_(host, non_blocking=True)
            else:
                self.dev_in[name].copy_(host)
            self.ledger.note('h2d', host.numel() * host.element_size(),
                             f'{name} image' if name in ('color', 'depth') else name)

    def run_stage(self, name: str) -> None:
        """Replay one stage's graph (CUDA) or run it (CPU) on the current stream."""
        graph = self.graphs.get(name)
        if graph is not None:
            graph.replay()
        else:
            with torch.no_grad():
                self.out[name] = self._fns[name]()

    def download(self) -> None:
        """Small results -> the pinned host buffers (asynchronous on a GPU)."""
        for name, t in self._downloads().items():
            self.host_out[name].copy_(t, non_blocking=self.cuda)
            self.ledger.note('d2h', t.numel() * t.element_size(), name)

    def finish(self) -> list[PlanarGrasp]:
        """After the download has completed: the ranked grasps, on the host."""
        from edge_loop.kernels.gpu.grasp import grasps_from_table

        if not self.has_target:
            self.grasps = []
        else:
            self.grasps = grasps_from_table(self.host_out['grasp_table'].numpy(),
                                            self.host_in['centroid'].numpy().copy(),
                                            self.grasp_params)
        return self.grasps

    def __call__(self, events: list | None = None) -> list[PlanarGrasp]:
        """One frame on the current stream; ``events``: 3 + stages CUDA events to record."""
        marks = iter(events or ())
        rec = (lambda: next(marks).record()) if events else (lambda: None)
        rec()
        self.upload()
        rec()
        for name in self.stage_names:
            self.run_stage(name)
            rec()
        self.download()
        if events:
            events[-1].record()
            events[-1].synchronize()
        elif self.cuda:
            torch.cuda.current_stream(self.device).synchronize()
        return self.finish()

    def nbytes(self) -> dict[str, int]:
        """Device and pinned-host bytes this step holds (buffers and state; not graph pools)."""
        dev = sum(t.numel() * t.element_size() for t in self.dev_in.values())
        dev += self.logodds.numel() * 4 + self.grid_prev.numel()
        host = sum(t.numel() * t.element_size() for t in self.host_in.values())
        host += sum(t.numel() * t.element_size() for t in self.host_out.values())
        return {'device': int(dev), 'host': int(host)}
