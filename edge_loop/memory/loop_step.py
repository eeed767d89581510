# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""A representative perception + control step in torch that allocates nothing per frame.

This is NOT one of the loop's verified kernels (the GPU kernels of issue 31 did not exist
when the memory work was measured); it stands in for them with the same shape of work on an
RGB-D frame, so the memory budget, the allocation counters and the decoder's interference can
be measured: upload the frame into a resident slot, height above the table, a foreground mask
smoothed by a 3x3 box filter, the mask's centroid and size, then a three-layer policy MLP that
turns those features into a 6-value command, downloaded to the host.

Every buffer is allocated in :meth:`RepresentativeStep.__init__` (the node's ``on_configure``)
and every op writes into one of them (``out=`` or in place, with 0-d tensors for constants,
since a Python scalar operand is wrapped into a new tensor), so a frame allocates nothing on
the CPU and nothing from the CUDA caching allocator; ``test/reasoning`` counts it.
"""

from __future__ import annotations

import torch

COMMAND_SIZE = 6
FEATURES = 4
HIDDEN = 64


class RepresentativeStep:
    """Resident buffers and the per-frame work of the stand-in loop step."""

    def __init__(self, height: int = 480, width: int = 640, *,
                 device: torch.device | str = 'cpu', seed: int = 0) -> None:
        dev = self.device = torch.device(device)
        self.shape = (height, width)
        f32 = {'dtype': torch.float32, 'device': dev}
        pinned = dev.type == 'cuda'
        # host side of the frame (the shared-memory slot on the robot) and of the command
        self.host_color = torch.zeros(height, width, 3, dtype=torch.uint8, pin_memory=pinned)
        self.host_depth = torch.zeros(height, width, dtype=torch.float32, pin_memory=pinned)
        self.host_command = torch.zeros(1, COMMAND_SIZE, dtype=torch.float32, pin_memory=pinned)
        self.color = torch.zeros(height, width, 3, dtype=torch.uint8, device=dev)
        self.depth = torch.zeros(height, width, **f32)
        self.color_f = torch.zeros(height, width, 3, **f32)
        self.brightness = torch.zeros(height, width, **f32)
        self.height_m = torch.zeros(height, width, **f32)
        self.fg_bool = torch.zeros(height, width, dtype=torch.bool, device=dev)
        self.fg = torch.zeros(height, width, **f32)
        self.box_h = torch.zeros(height, width, **f32)
        self.box = torch.zeros(height, width, **f32)
        self.row_sum = torch.zeros(height, **f32)
        self.col_sum = torch.zeros(width, **f32)
        self.row_weighted = torch.zeros(height, **f32)
        self.col_weighted = torch.zeros(width, **f32)
        self.v_ramp = torch.arange(height, **f32)
        self.u_ramp = torch.arange(width, **f32)
        self.count, self.cx, self.cy, self.lum = (torch.zeros((), **f32) for _ in range(4))
        self.features = torch.zeros(1, FEATURES, **f32)
        self.camera_z = torch.tensor(0.75, **f32)
        self.min_height = torch.tensor(0.01, **f32)
        self.box_min = torch.tensor(4.5, **f32)
        self.one = torch.tensor(1.0, **f32)
        gen = torch.Generator().manual_seed(seed)

        def weight(*shape: int) -> torch.Tensor:
            return (torch.randn(*shape, generator=gen) / shape[0] ** 0.5).to(dev)

        self.w1, self.b1 = weight(FEATURES, HIDDEN), torch.zeros(HIDDEN, **f32)
        self.w2, self.b2 = weight(HIDDEN, HIDDEN), torch.zeros(HIDDEN, **f32)
        self.w3, self.b3 = weight(HIDDEN, COMMAND_SIZE), torch.zeros(COMMAND_SIZE, **f32)
        self.h1 = torch.zeros(1, HIDDEN, **f32)
        self.h2 = torch.zeros(1, HIDDEN, **f32)
        self.command = torch.zeros(1, COMMAND_SIZE, **f32)

    def nbytes(self) -> dict[str, int]:
        """Resident bytes: device workspaces, and the host frame slot and command."""
        host_ids = {id(self.host_color), id(self.host_depth), id(self.host_command)}
        out = {'device': 0, 'host': 0}
        for value in vars(self).values():
            if isinstance(value, torch.Tensor):
                out['host' if id(value) in host_ids else 'device'] += (
                    value.numel() * value.element_size())
        return out

    def upload(self) -> None:
        """Frame into the resident device slot (one copy per input; none on the CPU path)."""
        if self.device.type == 'cpu':
            return
        self.color.copy_(self.host_color, non_blocking=True)
        self.depth.copy_(self.host_depth, non_blocking=True)

    def perceive(self) -> None:
        """Foreground mask, its centroid, size and brightness into ``self.features``."""
        color = self.host_color if self.device.type == 'cpu' else self.color
        depth = self.host_depth if self.device.type == 'cpu' else self.depth
        torch.sub(self.camera_z, depth, out=self.height_m)
        torch.gt(self.height_m, self.min_height, out=self.fg_bool)
        self.fg.copy_(self.fg_bool)
        # 3x3 box sum, separable, borders left at zero
        torch.add(self.fg[:, :-2], self.fg[:, 1:-1], out=self.box_h[:, 1:-1])
        self.box_h[:, 1:-1].add_(self.fg[:, 2:])
        torch.add(self.box_h[:-2], self.box_h[1:-1], out=self.box[1:-1])
        self.box[1:-1].add_(self.box_h[2:])
        torch.gt(self.box, self.box_min, out=self.fg_bool)
        self.fg.copy_(self.fg_bool)
        self.color_f.copy_(color)
        torch.sum(self.color_f, dim=2, out=self.brightness)
        self.brightness.mul_(self.fg)
        torch.sum(self.fg, dim=1, out=self.row_sum)
        torch.sum(self.fg, dim=0, out=self.col_sum)
        torch.sum(self.row_sum, dim=0, out=self.count)
        self.count.clamp_(min=self.one)
        # torch.dot(out=) computes into a new tensor and copies, so multiply, then sum
        torch.mul(self.row_sum, self.v_ramp, out=self.row_weighted)
        torch.sum(self.row_weighted, dim=0, out=self.cy)
        torch.mul(self.col_sum, self.u_ramp, out=self.col_weighted)
        torch.sum(self.col_weighted, dim=0, out=self.cx)
        # a sum over both dimensions at once allocates a partial-sum buffer: rows first
        torch.sum(self.brightness, dim=1, out=self.row_weighted)
        torch.sum(self.row_weighted, dim=0, out=self.lum)
        torch.stack([self.cx, self.cy, self.lum, self.count], out=self.features[0])
        self.features[0, :3].div_(self.count)

    def control(self) -> None:
        """Policy MLP: features -> command."""
        torch.addmm(self.b1, self.features, self.w1, out=self.h1).relu_()
        torch.addmm(self.b2, self.h1, self.w2, out=self.h2).relu_()
        torch.addmm(self.b3, self.h2, self.w3, out=self.command)

    def download(self) -> None:
        """Command to the host (the only device-to-host copy per frame)."""
        self.host_command.copy_(self.command, non_blocking=self.device.type == 'cuda')

    def __call__(self) -> torch.Tensor:
        self.upload()
        self.perceive()
        self.control()
        self.download()
        return self.host_command

    def fill_frame(self, generator: torch.Generator, objects: int = 3) -> None:
        """Write a synthetic frame (table at 0.75 m, ``objects`` boxes) into the host slot."""
        h, w = self.shape
        self.host_depth.fill_(0.75)
        self.host_color.fill_(90)
        for _ in range(objects):
            y, x = (int(torch.randint(0, h - 60, (1,), generator=generator)),
                    int(torch.randint(0, w - 60, (1,), generator=generator)))
            self.host_depth[y:y + 50, x:x + 40] = 0.70
            self.host_color[y:y + 50, x:x + 40] = 200
