# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Device-agnostic torch ports of the heavy per-pixel kernels (CPU, CUDA, ROCm/HIP).

The numpy kernels in :mod:`edge_loop.kernels` stay the references; the ports here are gated
against them by ``edge_loop/verify/ops_gpu_*.py`` per device and dtype. Needs torch (imported
by the submodules): a CPU-only robot without torch never imports this package.

- :mod:`.occupancy`: occupancy integration and the stateful :class:`TorchOccupancyMapper`;
- :mod:`.locator`: the locator's per-pixel colour/depth masks;
- :mod:`.grasp`: grasp-candidate scoring;
- :mod:`.segnet`: segnet as a torch module on a device, and through ONNX Runtime providers;
- :mod:`.graphs`: one CUDA graph per stage and frame shape (the kernels are launch-bound
  without it);
- :mod:`.transfer`: host/device handoff methods and the copy ledger;
- :mod:`.loop`: :func:`gpu_loop_step`, one frame's per-pixel work on a device.
"""

from __future__ import annotations
