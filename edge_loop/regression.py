# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Replay-regression gates: pure functions from recorded outputs and ground truth to verdicts.

Each gate returns a list of failure strings naming the frame, the stage and by how much, so a
failing test says exactly what regressed; :class:`MachineCalibration` scales the real-time
budgets to the machine the test runs on. Used by test/ros/test_replay_regression.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edge_loop.kernels.camera import Extrinsics, Intrinsics, project, world_to_camera


@dataclass(frozen=True)
class MachineCalibration:
    """How much slower this machine runs the loop than the one its real-time budgets were set on.

    Two figures are measured here before the replay, each against the same figure on the
    budgets' machine: ``kernel_ms``, the deployed locator's p50 on its fixed performance case
    alone (single-thread speed), and ``parallel_ms``, its p50 in ``parallel_workers``
    processes timed at once (how the cores hold up together: two vCPUs that are one core's
    hyperthreads run one locator at full speed and two at much less, and the loop is seven
    processes). The slower ratio counts. A replay is paced by it
    (:class:`edge_loop.check.pacing.Pacing`: 1 / slowdown of the bag's rate, budgets x
    slowdown). A live camera cannot be paced; seven processes then share the cores and queue
    for them, so the loop's latency grows faster than one kernel's time: ``budget_scale`` is
    ``slowdown ** exponent`` (config/regression.yaml gives the exponent and the runs it rests
    on). Never below 1: a faster machine keeps the budgets of the target.
    """

    kernel_ms: float
    reference_ms: float
    exponent: float
    parallel_ms: float | None = None
    parallel_reference_ms: float | None = None
    parallel_workers: int = 0

    def __post_init__(self) -> None:
        if not (self.kernel_ms > 0 and self.reference_ms > 0 and self.exponent >= 1):
            raise ValueError(f'calibration needs positive times and an exponent >= 1, got '
                             f'{self.kernel_ms!r} ms, {self.reference_ms!r} ms, '
                             f'{self.exponent!r}')
        if (self.parallel_ms is None) != (self.parallel_reference_ms is None) or (
                self.parallel_ms is not None
                and not (self.parallel_ms > 0 and self.parallel_reference_ms > 0)):
            raise ValueError(f'the parallel figure needs both positive times, got '
                             f'{self.parallel_ms!r} ms and {self.parallel_reference_ms!r} ms')

    @classmethod
    def measure(cls, gates: dict) -> MachineCalibration:
        """Time the deployed locator here (alone, then in parallel) against ``gates``.

        ``gates`` is config/regression.yaml's: ``realtime_reference_locator_ms``,
        ``realtime_budget_exponent`` and, when present,
        ``realtime_reference_locator_parallel_ms`` with ``realtime_reference_parallel_workers``.
        """
        from edge_loop.verify.timing import (
            deployed_locator,
            deployed_ms_p50,
            locator_ms_p50_parallel,
        )

        alone = deployed_ms_p50(deployed_locator())
        reference = gates.get('realtime_reference_locator_parallel_ms')
        if reference is None:
            return cls(alone, gates['realtime_reference_locator_ms'],
                       gates['realtime_budget_exponent'])
        workers = int(gates['realtime_reference_parallel_workers'])
        return cls(alone, gates['realtime_reference_locator_ms'],
                   gates['realtime_budget_exponent'],
                   locator_ms_p50_parallel(workers), reference, workers)

    @classmethod
    def measure_configured(cls) -> MachineCalibration:
        """:meth:`measure` against the gates of config/regression.yaml."""
        import yaml

        from edge_loop.paths import config_path

        return cls.measure(yaml.safe_load(config_path('regression.yaml').read_text())['gates'])

    @property
    def slowdown(self) -> float:
        """This machine's kernel time over the reference's, the slower ratio (at least 1)."""
        ratios = [self.kernel_ms / self.reference_ms]
        if self.parallel_ms is not None:
            ratios.append(self.parallel_ms / self.parallel_reference_ms)
        return max(1.0, *ratios)

    @property
    def budget_scale(self) -> float:
        """Factor applied to every real-time budget (p99 gate and deadline monitor)."""
        return self.slowdown ** self.exponent

    def describe(self) -> str:
        """One line for the test output: what was measured and what it does to the budgets."""
        parallel = ('' if self.parallel_ms is None else
                    f', {self.parallel_ms:.2f} ms vs {self.parallel_reference_ms:.2f} ms '
                    f'with {self.parallel_workers} at once')
        return (f'machine calibration: locator p50 {self.kernel_ms:.2f} ms here vs '
                f'{self.reference_ms:.2f} ms on the reference machine alone{parallel} = '
                f'{self.slowdown:.2f}x slower; real-time budgets scaled '
                f'x{self.budget_scale:.2f} (slowdown ** {self.exponent:g})')


@dataclass(frozen=True)
class FrameTruth:
    """Ground truth of one frame from a scenario bag."""

    stamp_ns: int
    centroids: np.ndarray          # (M, 3) world
    mask: np.ndarray | None        # (H, W) labels, 0 background
    occupancy: np.ndarray | None   # (rows, cols) bool


def match_objects(detections: np.ndarray, truth: np.ndarray, radius: float
                  ) -> tuple[list[float], int, int]:
    """Greedy nearest matching: (errors of matched pairs, missed truths, false detections)."""
    det = np.asarray(detections, dtype=np.float64).reshape(-1, 3)
    gt = np.asarray(truth, dtype=np.float64).reshape(-1, 3)
    if len(det) == 0 or len(gt) == 0:
        return [], len(gt), len(det)
    dist = np.linalg.norm(det[:, None, :] - gt[None, :, :], axis=-1)
    errors: list[float] = []
    used_d: set[int] = set()
    used_g: set[int] = set()
    for flat in np.argsort(dist, axis=None):
        i, j = np.unravel_index(flat, dist.shape)
        if i in used_d or j in used_g or dist[i, j] > radius:
            continue
        used_d.add(int(i))
        used_g.add(int(j))
        errors.append(float(dist[i, j]))
    return errors, len(gt) - len(used_g), len(det) - len(used_d)


def object_gate(frames: dict[int, np.ndarray], truth: dict[int, FrameTruth], g: dict,
                label: str) -> list[str]:
    """Detection rate, false detections and centroid error of object_locator."""
    errors: list[float] = []
    missed = false = visible = 0
    failures = []
    for stamp, tr in truth.items():
        if stamp not in frames:
            failures.append(f'{label}: frame {stamp}: object_locator published nothing')
            continue
        e, m, f = match_objects(frames[stamp], tr.centroids, g['object_match_radius_m'])
        errors += e
        missed += m
        false += f
        visible += len(tr.centroids)
        if f > g['max_false_detections']:
            failures.append(f'{label}: frame {stamp}: {m} missed, {f} false detections')
    rate = 1.0 - missed / visible if visible else 1.0
    if rate < g['min_detection_rate']:
        failures.append(f'{label}: object_locator detection rate {rate:.1%} < '
                        f'{g["min_detection_rate"]:.0%} ({missed} of {visible} missed)')
    if false > g['max_false_detections']:
        failures.append(f'{label}: object_locator {false} false detections > '
                        f'{g["max_false_detections"]}')
    if errors:
        med, worst = float(np.median(errors)), float(np.max(errors))
        if med > g['object_error_median_m']:
            failures.append(f'{label}: object_locator median centroid error {med * 1e3:.1f} mm '
                            f'> {g["object_error_median_m"] * 1e3:.0f} mm')
        if worst > g['object_error_max_m']:
            failures.append(f'{label}: object_locator worst centroid error {worst * 1e3:.1f} mm '
                            f'> {g["object_error_max_m"] * 1e3:.0f} mm')
    return failures


def _label_near(mask: np.ndarray, uv: np.ndarray, tol: int) -> set[int]:
    u, v = int(round(uv[0])), int(round(uv[1]))
    h, w = mask.shape
    patch = mask[max(0, v - tol):min(h, v + tol + 1), max(0, u - tol):min(w, u + tol + 1)]
    return {int(x) for x in np.unique(patch)}


def grasp_gate(grasps: dict[int, np.ndarray | None], truth: dict[int, FrameTruth],
               intr: Intrinsics, ext: Extrinsics, g: dict, label: str) -> list[str]:
    """Grasp rectangles: centre on an object's mask, open fingers off it, opening in range."""
    failures = []
    tol = int(g['grasp_mask_tolerance_px'])
    for stamp, tr in truth.items():
        if stamp not in grasps:
            failures.append(f'{label}: frame {stamp}: grasp_planner published nothing')
            continue
        corners = grasps[stamp]
        if corners is None:
            if len(tr.centroids):
                failures.append(f'{label}: frame {stamp}: no grasp with '
                                f'{len(tr.centroids)} visible objects')
            continue
        if tr.mask is None:
            continue
        centre = corners.mean(axis=0)
        closing = corners[1] - corners[0]
        opening = float(np.linalg.norm(closing))
        if not 0.0 < opening <= g['max_opening_m'] + 1e-6:
            failures.append(f'{label}: frame {stamp}: grasp opening {opening * 1e3:.1f} mm '
                            f'outside (0, {g["max_opening_m"] * 1e3:.0f}] mm')
        pads = np.array([centre - closing / 2, centre + closing / 2])
        uv = project(world_to_camera(np.vstack([centre, pads]), ext), intr)
        under = _label_near(tr.mask, uv[0], 0) - {0}
        if not under:
            near = _label_near(tr.mask, uv[0], tol) - {0}
            if not near:
                failures.append(f'{label}: frame {stamp}: grasp centre at pixel '
                                f'({uv[0][0]:.0f}, {uv[0][1]:.0f}) is not on any object')
                continue
            under = near
        k = min(under)
        for side, p in zip(('first', 'second'), uv[1:]):
            if k in _label_near(tr.mask, p, 0):
                failures.append(f'{label}: frame {stamp}: {side} finger lands on object {k} '
                                f'(opening {opening * 1e3:.1f} mm too small)')
    return failures


def iou(pred: np.ndarray, truth: np.ndarray) -> float:
    """Intersection over union of two boolean grids (1.0 when both are empty)."""
    union = np.logical_or(pred, truth).sum()
    return 1.0 if union == 0 else float(np.logical_and(pred, truth).sum() / union)


def occupancy_gate(grid: np.ndarray | None, truth: np.ndarray | None, g: dict, label: str,
                   stamp: int) -> list[str]:
    """IoU of the occupied cells on the last frame."""
    if truth is None:
        return []
    if grid is None:
        return [f'{label}: frame {stamp}: occupancy_mapper published nothing']
    if grid.shape != truth.shape:
        return [f'{label}: occupancy grid shape {grid.shape} != ground truth {truth.shape}']
    value = iou(grid >= 50, truth)
    if value < g['occupancy_min_iou']:
        return [f'{label}: frame {stamp}: occupancy IoU {value:.3f} < {g["occupancy_min_iou"]}']
    return []


def command_gate(commands: list[tuple[int, np.ndarray]], tcp: dict[int, np.ndarray],
                 targets: dict[int, np.ndarray], truth_grid: np.ndarray | None,
                 grid_origin: tuple[float, float], resolution: float, period_s: float,
                 g: dict, label: str) -> list[str]:
    """No command moves the TCP low into an occupied cell away from the target."""
    if truth_grid is None:
        return []
    failures = []
    for stamp, v in commands:
        p = tcp.get(stamp)
        if p is None or not np.any(v):
            continue
        nxt = p + v * period_s
        col = int((nxt[0] - grid_origin[0]) // resolution)
        row = int((nxt[1] - grid_origin[1]) // resolution)
        if not (0 <= row < truth_grid.shape[0] and 0 <= col < truth_grid.shape[1]):
            continue
        target = targets.get(stamp)
        near_target = target is not None and np.linalg.norm(
            nxt[:2] - target[:2]) <= g['target_radius_m']
        if truth_grid[row, col] and nxt[2] < g['occupied_clearance_z_m'] and not near_target:
            failures.append(f'{label}: frame {stamp}: pick_controller commands the TCP to '
                            f'({nxt[0]:.3f}, {nxt[1]:.3f}, {nxt[2]:.3f}), an occupied cell '
                            f'{g["occupied_clearance_z_m"] - nxt[2]:.3f} m below clearance')
    return failures


def grasp_state_gate(states: list[str], expected: list[str], label: str) -> list[str]:
    """Every expected decision appears, in order."""
    seen = [s for i, s in enumerate(states) if i == 0 or s != states[i - 1]]
    it = iter(seen)
    missing = [e for e in expected if not any(s == e for s in it)]
    if missing:
        return [f'{label}: grasp_state never decided {missing} in order; sequence: '
                f'{" -> ".join(seen) or "(nothing)"}']
    return []
