# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The object locator's per-pixel colour/depth pipeline in torch (any ``torch.device``).

What runs per pixel in :func:`edge_loop.kernels.object_locator.locate_objects` before its
connected-component tail: depth to metres, world height and the foreground (height window and
tray ROI), and the three cuts that separate touching objects (chromaticity step, specular-free
hue step, height step between foreground 4-neighbours). :func:`pixel_masks` computes them on
the whole frame at once; :func:`pixel_masks_reference` composes the locator's public numpy
functions (``height_scene``, ``color_cut``, ``hue_cut``, ``depth_cut``) into the same outputs,
and ``edge_loop/verify/ops_gpu_vision.py`` gates one against the other.

The tail (labelling, region growing and merging, object moments) stays on the CPU: it is
branchy, per region, and works on a few thousand foreground pixels. It needs the foreground and
kept masks only, which :func:`pack_mask` turns into bits on the device (VGA: 38.4 kB per mask
instead of the 921.6 kB colour image) before they cross to the host.

``dtype`` is the precision of the colour arithmetic (3x3 means, chromaticity, hue: values in
[0, 1]). The geometry stays float32 whatever ``dtype`` says: world height is depth times a ray
plus 0.75 m of camera height, a cancellation that half precision (0.5 mm steps at 0.75 m)
would spend against the 5.5 mm depth step and the 9 mm floor threshold.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 - torch's own spelling

from edge_loop.kernels.camera import Extrinsics, Intrinsics
from edge_loop.kernels.gpu.graphs import keep_alive_cache
from edge_loop.kernels.gpu.occupancy import depth_metres
from edge_loop.kernels.object_locator import (
    CHROMA_OFFSET,
    LINEAR_LUT,
    LocatorParams,
    color_cut,
    depth_cut,
    height_scene,
    hue_cut,
    linear_light,
)

DEFAULT_LOCATOR = LocatorParams()


@dataclass
class PixelMasks:
    """Per-pixel outputs of one frame (tensors on the device, or numpy from the reference)."""

    height: object   # (H, W) float32 world z (m), NaN = no depth
    fg: object       # (H, W) bool: foreground (height window and tray ROI)
    cut: object      # (H, W) bool: foreground pixels cut by colour, hue or depth steps


_RAYS: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = keep_alive_cache({})
_LUTS: dict[tuple, torch.Tensor] = keep_alive_cache({})


@torch.compiler.disable   # a host-side cache lookup (numpy keys): not traced
def world_rays_t(intr: Intrinsics, ext: Extrinsics,
                 device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(3, H, W) float32 world direction per metre of depth and (3,) origin, cached per device.

    Built in float64 and rounded once, as ``object_locator.world_rays`` builds its table.
    """
    key = (intr, ext.rotation.tobytes(), ext.translation.tobytes(), str(device))
    hit = _RAYS.get(key)
    if hit is not None:
        return hit
    u = (np.arange(intr.width, dtype=np.float64) - intr.cx) / intr.fx
    v = (np.arange(intr.height, dtype=np.float64) - intr.cy) / intr.fy
    uu, vv = np.meshgrid(u, v)
    cam = np.stack([uu, vv, np.ones_like(uu)], axis=-1)
    rays = (cam @ ext.rotation.T).astype(np.float32).transpose(2, 0, 1)
    out = (torch.from_numpy(np.ascontiguousarray(rays)).to(device),
           torch.from_numpy(ext.translation.astype(np.float32)).to(device))
    if len(_RAYS) > 16:
        _RAYS.clear()
    _RAYS[key] = out
    return out


@torch.compiler.disable   # a host-side cache lookup (numpy keys): not traced
def _linear_lut(device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    key = (str(device), dtype)
    if key not in _LUTS:
        _LUTS[key] = torch.from_numpy(LINEAR_LUT.astype(np.float32)).to(device=device,
                                                                          dtype=dtype)
    return _LUTS[key]


def _mean3x3(planes: torch.Tensor) -> torch.Tensor:
    """(C, H, W) 3x3 mean with mirrored edges (no repeat), as cv2.blur's default border."""
    x = planes.unsqueeze(0)
    mode = 'reflect' if min(planes.shape[-2:]) > 1 else 'replicate'
    x = F.pad(x, (1, 1, 1, 1), mode=mode)
    # separable sum: rows then columns (two passes of 3 terms each, not 9)
    x = x[..., :-2, :] + x[..., 1:-1, :] + x[..., 2:, :]
    x = x[..., :-2] + x[..., 1:-1] + x[..., 2:]
    return (x * (1.0 / 9.0)).squeeze(0)


def _both_sides(dx: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """Pixels on either side of each marked horizontal (dx) / vertical (dy) pair."""
    cut_x = F.pad(dx, (1, 0)) | F.pad(dx, (0, 1))
    cut_y = F.pad(dy, (0, 0, 1, 0)) | F.pad(dy, (0, 0, 0, 1))
    return cut_x | cut_y


def _step_cut(planes: torch.Tensor, mask: torch.Tensor, step: float) -> torch.Tensor:
    """Pixels of ``mask`` whose L1 over ``planes`` to a ``mask`` 4-neighbour exceeds ``step``."""
    dx = (planes[:, :, 1:] - planes[:, :, :-1]).abs().sum(0) > step
    dy = (planes[:, 1:] - planes[:, :-1]).abs().sum(0) > step
    return _both_sides(dx & mask[:, 1:] & mask[:, :-1], dy & mask[1:] & mask[:-1])


def pixel_masks(color: torch.Tensor | None, depth: torch.Tensor, intr: Intrinsics,
                ext: Extrinsics, params: LocatorParams = DEFAULT_LOCATOR,
                dtype: torch.dtype = torch.float32) -> PixelMasks:
    """Height, foreground and cut masks of one frame, on the device of ``depth``.

    ``color``: (H, W, 3) uint8 RGB tensor or None (no colour cuts); ``depth``: (H, W) 16-bit mm
    (uint16 or its int16 bits) or float metres.
    """
    if tuple(depth.shape) != (intr.height, intr.width):
        raise ValueError(f'depth is {tuple(depth.shape)} but camera_info says '
                         f'{intr.width}x{intr.height}')
    rays, origin = world_rays_t(intr, ext, depth.device)
    return pixel_masks_from_rays(color, depth, rays, origin, params, dtype)


def pixel_masks_from_rays(color: torch.Tensor | None, depth: torch.Tensor, rays: torch.Tensor,
                          origin: torch.Tensor, params: LocatorParams = DEFAULT_LOCATOR,
                          dtype: torch.dtype = torch.float32) -> PixelMasks:
    """:func:`pixel_masks` with the camera as tensors (:func:`world_rays_t`).

    The form a CUDA graph captures: the ray table is an input, so one graph per frame size
    serves any camera of that size.
    """
    p = params
    h, w = depth.shape
    d = depth_metres(depth)
    height = d * rays[2] + origin[2]
    x = d * rays[0] + origin[0]
    y = d * rays[1] + origin[1]
    fg = ((height > p.min_height) & (height < p.max_height) & (x > p.roi_x[0])
          & (x < p.roi_x[1]) & (y > p.roi_y[0]) & (y < p.roi_y[1]))
    cut = _step_cut(height.unsqueeze(0), fg, p.depth_step)
    if color is not None:
        if tuple(color.shape) != (h, w, 3):
            raise ValueError(f'colour image shape {tuple(color.shape)} does not match depth '
                             f'{w}x{h}x3')
        if color.dtype != torch.uint8:
            raise ValueError(f'colour must be uint8 RGB, got {color.dtype}')
        planes = color.permute(2, 0, 1)
        mean = _mean3x3(planes.to(dtype))
        chroma = mean / (mean.sum(0, keepdim=True) + CHROMA_OFFSET)
        cut = cut | _step_cut(chroma, fg, p.color_step)
        if p.hue_step > 0:
            lin = _mean3x3(_linear_lut(depth.device, dtype)[planes.to(torch.int64)])
            low = lin.amin(0, keepdim=True)
            free = lin - low
            level = free.sum(0)
            clip = float(linear_light(np.float64(p.merge_clip_level)))
            known = (lin.amax(0) < clip) & (level >= p.hue_min_level) & fg
            hues = free / torch.where(known, level, torch.ones_like(level))
            cut = cut | _step_cut(hues, known, p.hue_step)
    return PixelMasks(height, fg, cut & fg)


def pixel_masks_reference(color_rgb: np.ndarray | None, depth: np.ndarray, intr: Intrinsics,
                          ext: Extrinsics, params: LocatorParams = DEFAULT_LOCATOR
                          ) -> PixelMasks:
    """The same outputs from the locator's own (deployed, numpy/OpenCV) functions."""
    p = params
    scene = height_scene(depth, intr, ext)
    idx = np.arange(intr.width * intr.height)
    pts = scene.points(idx).reshape(intr.height, intr.width, 3)
    with np.errstate(invalid='ignore'):
        fg = ((scene.height > p.min_height) & (scene.height < p.max_height)
              & (pts[..., 0] > p.roi_x[0]) & (pts[..., 0] < p.roi_x[1])
              & (pts[..., 1] > p.roi_y[0]) & (pts[..., 1] < p.roi_y[1]))
    cut = depth_cut(scene.height, fg, p.depth_step)
    if color_rgb is not None:
        cut |= color_cut(color_rgb, fg, 0, 0, p.color_step)
        if p.hue_step > 0:
            cut |= hue_cut(color_rgb, fg, 0, 0, p)
    return PixelMasks(scene.height, fg, cut & fg)


def pack_mask(mask: torch.Tensor) -> torch.Tensor:
    """uint8 bits of a bool mask, 8 pixels a byte (``np.packbits`` order), on its device."""
    flat = mask.reshape(-1)
    pad = (-flat.numel()) % 8
    if pad:
        flat = F.pad(flat, (0, pad))
    # made on the device (a torch.tensor literal would be a host-to-device copy per call)
    weights = torch.bitwise_left_shift(
        torch.ones(8, dtype=torch.uint8, device=mask.device),
        torch.arange(7, -1, -1, dtype=torch.uint8, device=mask.device))
    return (flat.view(-1, 8).to(torch.uint8) * weights).sum(1, dtype=torch.uint8)


def unpack_mask(bits: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """The bool mask of :func:`pack_mask`'s bytes, on the host."""
    return np.unpackbits(bits)[:shape[0] * shape[1]].reshape(shape).astype(bool)


def masks_on(device: str | torch.device, dtype: torch.dtype = torch.float32):
    """:func:`pixel_masks` on ``device``, numpy in and out (the handoff included).

    The signature of :func:`pixel_masks_reference`; the outputs come back as numpy (the height
    image too: the gate compares it, the loop itself leaves it on the device).
    """
    from edge_loop.kernels.gpu.graphs import GraphCache
    from edge_loop.kernels.gpu.transfer import as_host_tensor

    dev = torch.device(device)
    graphs = GraphCache(dev)

    def masks(color_rgb: np.ndarray | None, depth: np.ndarray, intr: Intrinsics,
              ext: Extrinsics, params: LocatorParams = DEFAULT_LOCATOR) -> PixelMasks:
        if np.shape(depth) != (intr.height, intr.width):
            raise ValueError(f'depth is {np.shape(depth)} but camera_info says '
                             f'{intr.width}x{intr.height}')
        key = (intr, ext.rotation.tobytes(), ext.translation.tobytes(), params, dtype,
               color_rgb is None)
        inputs = [as_host_tensor(depth)]
        if color_rgb is not None:
            inputs.append(as_host_tensor(color_rgb))

        def make():
            def step(d, c=None):
                r = pixel_masks(c, d, intr, ext, params, dtype)
                return r.height, r.fg, r.cut
            return step

        height, fg, cut = graphs.run(key, make, *inputs)
        return PixelMasks(height.cpu().numpy(), fg.cpu().numpy(), cut.cpu().numpy())

    masks.__name__ = f'pixel_masks_{dev.type}_{str(dtype).removeprefix("torch.")}'
    return masks


class LocatorMasks:
    """The locator's per-pixel part on a device, for a node: numpy frames in, bool masks out.

    Per frame: the depth and the colour image go to the device (two host-to-device
    transfers, counted in ``ledger``), one graph replay computes :func:`pixel_masks`, and only
    the foreground and cut masks come back, packed to bits (VGA: 2 x 38.4 kB; no image comes
    back). Their host side feeds ``locate_objects(..., masks=...)``, which runs the CPU tail.
    The camera's ray table is an input of the graph, so :meth:`warm_up` at configure captures
    the graph every camera of that frame size replays.
    """

    def __init__(self, device: str | torch.device, dtype: torch.dtype = torch.float32,
                 ledger=None) -> None:
        from edge_loop.kernels.gpu.graphs import GraphCache

        self.device = torch.device(device)
        self.dtype = dtype
        self.ledger = ledger
        self._graphs = GraphCache(self.device)

    def _to_device(self, arr: np.ndarray) -> torch.Tensor:
        from edge_loop.kernels.gpu.transfer import as_host_tensor

        host = as_host_tensor(arr)
        if self.ledger is not None and self.device.type != 'cpu':
            self.ledger.note('h2d', host.numel() * host.element_size())
        return host.to(self.device)

    def __call__(self, color_rgb: np.ndarray | None, depth: np.ndarray, intr: Intrinsics,
                 ext: Extrinsics, params: LocatorParams = DEFAULT_LOCATOR
                 ) -> tuple[np.ndarray, np.ndarray]:
        """(foreground, cut): (H, W) bool numpy masks of one frame."""
        if np.shape(depth) != (intr.height, intr.width):
            raise ValueError(f'depth is {np.shape(depth)} but camera_info says '
                             f'{intr.width}x{intr.height}')
        if color_rgb is not None and np.shape(color_rgb) != (intr.height, intr.width, 3):
            raise ValueError(f'colour image shape {np.shape(color_rgb)} does not match depth '
                             f'{intr.width}x{intr.height}x3')
        rays, origin = world_rays_t(intr, ext, self.device)
        inputs = [self._to_device(depth), rays, origin]
        if color_rgb is not None:
            inputs.append(self._to_device(color_rgb))
        dtype = self.dtype

        def make():
            def step(d, rays_t, origin_t, c=None):
                r = pixel_masks_from_rays(c, d, rays_t, origin_t, params, dtype)
                return pack_mask(r.fg), pack_mask(r.cut)
            return step

        key = (intr.height, intr.width, np.asarray(depth).dtype.str, params, dtype,
               color_rgb is None)
        fg_bits, cut_bits = self._graphs.run(key, make, *inputs)
        fg_bits, cut_bits = fg_bits.cpu().numpy(), cut_bits.cpu().numpy()
        if self.ledger is not None and self.device.type != 'cpu':
            self.ledger.note('d2h', fg_bits.nbytes + cut_bits.nbytes, 'mask bits')
        shape = (intr.height, intr.width)
        return unpack_mask(fg_bits, shape), unpack_mask(cut_bits, shape)

    def warm_up(self, intr: Intrinsics, ext: Extrinsics,
                params: LocatorParams = DEFAULT_LOCATOR) -> None:
        """Capture the graph for ``intr``'s frame size on a synthetic frame (not counted)."""
        from edge_loop.kernels.camera import warm_up_frame

        ledger, self.ledger = self.ledger, None
        try:
            color, depth = warm_up_frame(intr)
            self(color, depth, intr, ext, params)
        finally:
            self.ledger = ledger
