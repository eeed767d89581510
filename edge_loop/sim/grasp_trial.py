# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Grasp trials: does a planar grasp hold the object through a lift and a shake.

A trial builds the seeded scene, puts the open gripper above the grasp at its yaw, descends to
the closing height (stopping early if blocked), closes with a force limit, lifts 0.15 m,
shakes and then checks that an object is still between the fingers above the tray floor.

The shake (issue 34's, as judged on an independent simulator): 1 s of a 2 Hz sine, the TCP
displaced +-3 cm horizontally across the closing direction (along the pads, where only
friction holds the object) and turned +-0.15 rad about the vertical, both in phase; then
0.3 s at rest before the verdict. The tactile trace (finger positions, measured forces,
height of the object nearest the grasp) is returned with the verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pybullet as p

from edge_loop.kernels.grasp_types import PlanarGrasp, grasp_rectangle
from edge_loop.sim.gripper import PAD_HALF_LENGTH
from edge_loop.sim.world import DT, TRAY_FLOOR, SimWorld

# Phases recorded in the trace.
PHASES = ('approach', 'descend', 'close', 'lift', 'shake', 'hold')
MIN_TCP_Z = TRAY_FLOOR + PAD_HALF_LENGTH + 0.002   # fingertips just above the tray floor
HELD_MIN_Z = 0.04                                  # object bottom this high = off the floor
SHAKE_S = 1.0             # shake duration (s)
SHAKE_HZ = 2.0
SHAKE_AMPLITUDE_M = 0.03  # horizontal displacement amplitude, across the closing direction
SHAKE_AMPLITUDE_RAD = 0.15  # yaw amplitude
SETTLE_AFTER_SHAKE_S = 0.3


@dataclass
class TrialResult:
    """Outcome of one grasp trial."""

    success: bool
    # held | closed_empty (fingers met) | blocked_empty (descent blocked, then fingers met) |
    # no_object (fingers stopped on the tray or table, not on an object) | dropped_lift |
    # dropped_shake
    reason: str
    trace: dict[str, np.ndarray] = field(default_factory=dict)
    object_k: int = 0  # object nearest the grasp centre (0: none)
    closing_z: float = 0.0


def surface_height(world: SimWorld, grasp: PlanarGrasp, samples: int = 5) -> float:
    """Highest geometry (m) under the jaw rectangle, gripper ignored (table top = 0)."""
    corners = grasp_rectangle(grasp)
    a = np.linspace(0.0, 1.0, samples)
    pts = [corners[0] + s * (corners[1] - corners[0]) + t * (corners[3] - corners[0])
           for s in a for t in (0.0, 0.5, 1.0)]
    frm = [[x, y, 1.0] for x, y, _ in pts]
    to = [[x, y, -0.05] for x, y, _ in pts]
    hits = p.rayTestBatch(frm, to, physicsClientId=world.client)
    zs = [h[3][2] for h in hits if h[0] >= 0 and h[0] != world.gripper.body]
    return float(max(zs)) if zs else 0.0


def held_object(world: SimWorld) -> int:
    """Label of an object touched by both fingers with its bottom off the floor (0: none)."""
    for o in world.objects:
        lo, _ = p.getAABB(o.body_id, physicsClientId=world.client)
        off_floor = HELD_MIN_Z + (world.floor_top - TRAY_FLOOR)
        if lo[2] > off_floor and world.gripper.contacts_with(o.body_id) >= 1:
            pos, _ = o.pose
            tcp, yaw = world.gripper.tcp_pose()
            local = pos - tcp
            across = -np.sin(yaw) * local[0] + np.cos(yaw) * local[1]
            along = np.cos(yaw) * local[0] + np.sin(yaw) * local[1]
            if abs(along) < world.gripper.hand.max_opening / 2 + 0.02 and abs(across) < 0.06:
                return o.k
    return 0


class _Recorder:
    def __init__(self, world: SimWorld, k: int,
                 on_step: Callable[[SimWorld, int], None] | None) -> None:
        self.world, self.k, self.on_step = world, k, on_step
        self.rows: list[list[float]] = []

    def step(self, n: int, phase: int) -> None:
        for _ in range(n):
            self.world.step()
            if self.on_step is not None:
                self.on_step(self.world, phase)
            pos, _, force = self.world.gripper.joint_state()
            z = self.world.object_by_k(self.k).pose[0][2] if self.k else np.nan
            tcp, _ = self.world.gripper.tcp_pose()
            self.rows.append([self.world.sim_time, *pos, *force, z, tcp[2], phase])

    def trace(self) -> dict[str, np.ndarray]:
        a = np.array(self.rows, dtype=np.float64).reshape(-1, 8)
        return {'t': a[:, 0], 'positions': a[:, 1:3], 'forces': a[:, 3:5],
                'object_z': a[:, 5], 'tcp_z': a[:, 6], 'phase': a[:, 7].astype(np.int8)}


def _nearest_object(world: SimWorld, xy: np.ndarray) -> int:
    best, best_d = 0, 0.08
    for o in world.objects:
        d = float(np.linalg.norm(o.pose[0][:2] - xy))
        if d < best_d:
            best, best_d = o.k, d
    return best


def _fly_to(g: Any, rec: _Recorder, target: np.ndarray, yaw: float,
            speed: float = 0.4, timeout_s: float = 4.0) -> None:
    """Drive the TCP to ``target`` / ``yaw`` with a saturated P controller on the twist."""
    for _ in range(int(timeout_s / DT)):
        xyz, cur_yaw = g.tcp_pose()
        err = target - xyz
        dyaw = float(np.arctan2(np.sin(yaw - cur_yaw), np.cos(yaw - cur_yaw)))
        if np.linalg.norm(err) < 0.002 and abs(dyaw) < 0.01:
            break
        v = 4.0 * err
        n = float(np.linalg.norm(v))
        if n > speed:
            v *= speed / n
        g.command_twist(v, float(np.clip(4.0 * dyaw, -2.0, 2.0)))
        rec.step(1, 0)
    g.command_twist([0, 0, 0], 0.0)


def _shake(g: Any, rec: _Recorder) -> None:
    """The shake: displacement A sin(2 pi f t) across the closing direction, yaw likewise.

    Commanded as the twist of that motion (its derivative), which the gripper's target
    integrates exactly; the commanded speeds (0.38 m/s, 1.9 rad/s) are within its limits.
    """
    _, yaw0 = g.tcp_pose()
    across = np.array([-np.sin(yaw0), np.cos(yaw0), 0.0])
    w = 2.0 * np.pi * SHAKE_HZ
    for i in range(int(round(SHAKE_S / DT))):
        c = np.cos(w * (i + 0.5) * DT)
        g.command_twist(across * (SHAKE_AMPLITUDE_M * w * c), SHAKE_AMPLITUDE_RAD * w * c)
        rec.step(1, 4)


def execute_grasp(world: SimWorld, grasp: PlanarGrasp, *, lift: float = 0.15,
                  grip_force: float = 40.0, shake: bool = True, speed: float = 0.15,
                  approach: str = 'teleport', approach_height: float = 0.10,
                  on_step: Callable[[SimWorld, int], None] | None = None) -> TrialResult:
    """Run the scripted grasp in ``world`` (which is left as the grasp ends).

    ``approach``: 'teleport' puts the open gripper above the grasp at once; 'move' flies it
    there from where it is (for recordings); the descent starts ``approach_height`` above the
    closing height. ``on_step(world, phase)`` runs after every
    physics step (phase indexes :data:`PHASES`).
    """
    g = world.gripper
    hand = g.hand
    max_opening = hand.max_opening
    min_tcp_z = MIN_TCP_Z + (world.floor_top - TRAY_FLOOR) + (hand.pad_half_length
                                                               - PAD_HALF_LENGTH)
    if grasp.depth_below_top is not None:
        z_close = surface_height(world, grasp) - float(grasp.depth_below_top)
    else:
        z_close = float(grasp.center[2])
    z_close = max(z_close, min_tcp_z)
    k = _nearest_object(world, grasp.center[:2])
    rec = _Recorder(world, k, on_step)
    highest = max([p.getAABB(o.body_id, physicsClientId=world.client)[1][2]
                   for o in world.objects] + [0.05])
    z_pre = max(z_close + approach_height, highest - hand.fingertip_z + hand.tcp_offset_z + 0.03)
    pre = np.array([grasp.center[0], grasp.center[1], z_pre])
    if approach == 'move':
        g.command_gripper(min(grasp.opening, max_opening), grip_force)
        _fly_to(g, rec, pre, grasp.yaw)
    else:
        g.teleport(pre, grasp.yaw)
        g.set_opening_now(min(grasp.opening, max_opening))
        g.command_gripper(min(grasp.opening, max_opening), grip_force)
    rec.step(12, 0)
    # Descend; slow down near the target, stop when there or when blocked.
    limit = int(4.0 / DT)
    blocked = False
    last_z, stall = g.tcp_pose()[0][2], 0
    for _ in range(limit):
        z = g.tcp_pose()[0][2]
        err = z - z_close
        if err <= 0.001:
            break
        g.command_twist([0, 0, -min(speed, max(6.0 * err, 0.02))], 0.0)
        rec.step(1, 1)
        stall = stall + 1 if last_z - z < 1e-5 else 0
        last_z = z
        if stall > 24:
            blocked = True
            break
    g.command_twist([0, 0, 0], 0.0)
    rec.step(6, 1)
    # Close until the fingers stop.
    g.command_gripper(0.0, grip_force)
    for i in range(int(1.2 / DT)):
        rec.step(1, 2)
        _, vel, _ = g.joint_state()
        if i > 24 and np.all(np.abs(vel) < 0.002):
            break
    rec.step(24, 2)
    if g.opening() < 0.002:
        return TrialResult(False, 'blocked_empty' if blocked else 'closed_empty', rec.trace(),
                           k, z_close)
    if not any(g.contacts_with(o.body_id) for o in world.objects):
        return TrialResult(False, 'no_object', rec.trace(), k, z_close)
    # Lift.
    g.command_twist([0, 0, speed], 0.0)
    rec.step(int(lift / speed / DT), 3)
    g.command_twist([0, 0, 0], 0.0)
    rec.step(24, 3)
    if not held_object(world):
        return TrialResult(False, 'dropped_lift', rec.trace(), k, z_close)
    if shake:
        _shake(g, rec)
        g.command_twist([0, 0, 0], 0.0)
        rec.step(int(SETTLE_AFTER_SHAKE_S / DT), 5)
        if not held_object(world):
            return TrialResult(False, 'dropped_shake', rec.trace(), k, z_close)
    return TrialResult(True, 'held', rec.trace(), k, z_close)


def run_grasp_trial(seed: int, grasp: PlanarGrasp, *, split: str = 'heldout',
                    n_objects: int = 1, object_specs: list[str] | None = None,
                    lift: float = 0.15, grip_force: float = 40.0,
                    shake: bool = True) -> TrialResult:
    """Build scene ``seed`` (``split``, ``n_objects``) and run ``grasp`` in it."""
    with SimWorld(seed, n_objects=n_objects, split=split, object_specs=object_specs) as world:
        return execute_grasp(world, grasp, lift=lift, grip_force=grip_force, shake=shake)
