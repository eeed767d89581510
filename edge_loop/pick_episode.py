# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Closed-loop pick episodes in the physics simulator, without ROS (kernel level).

One episode: a held-out scene (``SimWorld``), the camera at ``camera_hz``, the vision kernels
as the grasp_planner node runs them (the object locator on the rendered colour and depth, then
the grasp planner for its objects; ``perception='truth'`` uses the simulator's mask baseline
instead), the occupancy kernel fused over the frames, the tactile
grasp-state estimator at the physics rate (240 Hz) on the noisy, biased, delayed finger forces,
and :class:`~edge_loop.kernels.policy.PickPolicy` commanding the gripper. The episode succeeds
when an object has been carried out of the tray and released over the drop pose.

``commands_into_occupied`` counts the policy commands that would move a finger, going down,
onto a cell that the simulator's *true* occupancy marks occupied, that is not the planned
object's own, and where geometry rises above the fingertips' next height (ray test).

Frames are rendered only while the policy observes from home: in the other phases the plan is
locked and a frame would only show the gripper (the node gets every frame; this saves time).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edge_loop.kernels.camera import D435_VGA
from edge_loop.kernels.grasp_state import GraspStateEstimator
from edge_loop.kernels.grasp_types import GRASP_ALTERNATIVES
from edge_loop.kernels.occupancy import OCC_OCCUPIED, GridSpec, OccupancyMapper
from edge_loop.kernels.policy import (
    PickPolicy,
    PolicyInputs,
    PolicyParams,
    check_grasp_clear,
    finger_footprints,
    footprint_cells,
    target_cells,
)

PAD_HALF_LENGTH = 0.015   # TCP to fingertip (m), as the simulated gripper


@dataclass
class EpisodeResult:
    """Outcome of one closed-loop episode."""

    success: bool
    time: float                      # simulated seconds until the release (or the limit)
    commands_into_occupied: int
    attempts: int = 0
    reason: str = ''
    phases: list[tuple[float, str, str]] = field(default_factory=list)
    wall_s: float = 0.0


def _perceive(world, frame, perception: str, grasp_params=None):
    """(grasp or None, the planner's other grasps best first) from one rendered frame."""
    if perception == 'truth':
        from edge_loop.sim.baselines import mask_centroid_grasp

        return mask_centroid_grasp(world, frame), []
    from edge_loop.kernels.grasp_planner import plan_grasp
    from edge_loop.kernels.object_locator import locate_objects

    # as edge_loop/nodes/grasp_planner.py: the locator sees the colour image too (and with it
    # the lighting), not only the depth
    depth = frame.depth_mm
    objects = locate_objects(frame.color, depth, frame.intrinsics, world.extrinsics)
    grasps = plan_grasp(depth, frame.intrinsics, world.extrinsics, objects=objects,
                        params=grasp_params)
    return (grasps[0], grasps[1:1 + GRASP_ALTERNATIVES]) if grasps else (None, [])


def _into_occupied(world, truth: np.ndarray, spec: GridSpec, tcp, yaw: float, opening: float,
                   twist, plan, horizon: float = 0.1) -> bool:
    """Whether this command moves a finger, going down, into foreign occupied space.

    Candidate cells: under the finger footprints at the commanded position ``horizon`` s
    ahead, occupied in the simulator's true grid and not the planned object's (as the policy's
    check defines it). The command is counted only when, at one of those cells, some geometry
    other than the gripper rises above the fingertips' next height (a ray test in the
    simulator), i.e. the fingers would be lower than what stands there.
    """
    if twist[2] >= 0.0:
        return False
    nxt = np.asarray(tcp[:3]) + np.asarray(twist[:3]) * horizon
    tip_z = float(nxt[2]) - PAD_HALF_LENGTH
    if tip_z > 0.5:
        return False
    from edge_loop.kernels.grasp_types import PlanarGrasp

    width = plan.finger_width if plan is not None else 0.02
    grid = np.where(truth, OCC_OCCUPIED, 0).astype(np.int8)
    g = PlanarGrasp(center=nxt, yaw=yaw, opening=opening, finger_width=width)
    if plan is not None:
        _, _, blocked = check_grasp_clear(g, grid, spec, own=target_cells(plan, grid, spec))
    else:
        blocked = np.zeros(spec.shape, dtype=bool)
        for poly in finger_footprints(g):
            blocked |= footprint_cells(poly, spec)
        blocked &= truth
    if not blocked.any():
        return False
    xs, ys = spec.cell_centers()
    return _geometry_above(world, xs[blocked], ys[blocked], tip_z)


def _geometry_above(world, xs: np.ndarray, ys: np.ndarray, z: float) -> bool:
    """Whether anything but the gripper (and what it holds) rises above ``z`` at the points."""
    import pybullet as p

    g = world.gripper
    skip = {g.body} | {o.body_id for o in world.objects if g.contacts_with(o.body_id)}
    top = np.full(len(xs), 1.0)
    todo = np.arange(len(xs))
    for _ in range(6):   # re-cast below the gripper (or the held object) where hit first
        if todo.size == 0:
            return False
        frm = [[float(xs[i]), float(ys[i]), float(top[i])] for i in todo]
        to = [[f[0], f[1], z] for f in frm]
        hits = p.rayTestBatch(frm, to, physicsClientId=world.client)
        again = []
        for i, h in zip(todo, hits):
            if h[0] in skip:
                top[i] = h[3][2] - 1e-4
                again.append(i)
            elif h[0] >= 0:
                return True
        todo = np.array(again, dtype=np.int64)
    return False


def run_pick_episode(seed: int, lighting: str = 'nominal', *, split: str = 'heldout',
                     n_objects: int | None = None, perception: str = 'vision',
                     time_limit_s: float = 40.0, camera_hz: float = 15.0,
                     params: PolicyParams | None = None,
                     grasp_params: Any = None) -> EpisodeResult:
    """Run one pick in scene ``seed`` under ``lighting``; see the module docstring.

    ``grasp_params``: the planner's ``GraspParams`` (None: its defaults).
    """
    from edge_loop.sim.world import DT, SimWorld

    wall0 = time.perf_counter()
    params = params or PolicyParams()
    spec = GridSpec()
    policy = PickPolicy(params)
    mapper = OccupancyMapper(spec)
    estimator = GraspStateEstimator()
    into_occupied = 0
    phases: list[tuple[float, str, str]] = []
    steps_per_frame = max(1, round(1.0 / (camera_hz * DT)))
    with SimWorld(seed, split=split, lighting=lighting, n_objects=n_objects,
                  intrinsics=D435_VGA) as world:
        g = world.gripper
        start = world.sim_time
        inputs = PolicyInputs(occupancy_spec=spec)
        cmd_opening = params.max_opening
        g.command_gripper(cmd_opening, params.grip_force)
        released_at = None
        while world.sim_time - start < time_limit_s:
            now = world.sim_time
            tcp, yaw = g.tcp_pose()
            inputs.tcp = (float(tcp[0]), float(tcp[1]), float(tcp[2]), float(yaw))
            inputs.tcp_stamp = now
            if policy.phase == 'observe' and policy.home_since is not None:
                frame = world.render()
                grid = mapper.update(frame.depth_mm, frame.intrinsics, world.extrinsics)
                inputs.occupancy, inputs.occupancy_stamp = grid, now
                inputs.grasp, inputs.grasp_alternatives = _perceive(world, frame, perception,
                                                                        grasp_params)
                inputs.grasp_stamp = now
            out = policy.step(now, inputs)
            if not phases or phases[-1][1] != out.phase:
                phases.append((round(now - start, 3), out.phase, out.reason))
            if any(out.twist) and _into_occupied(
                    world, world.gt_occupancy(), spec, inputs.tcp, yaw, g.opening(), out.twist,
                    policy.plan):
                into_occupied += 1
            g.command_twist(list(out.twist[:3]), out.twist[3])
            g.command_gripper(out.gripper_opening, out.gripper_force)
            cmd_opening = out.gripper_opening
            if out.phase == 'return' and released_at is None and policy.picks > 0:
                released_at = now
            if released_at is not None and now - released_at > 0.5:
                break
            if out.reason == 'gave_up':
                break
            for _ in range(steps_per_frame):
                world.step()
                pos, vel, force = g.joint_state()
                t = world.sim_time
                inputs.grasp_state = estimator.update(t, pos, vel, force, cmd_opening)
                inputs.grasp_state_stamp = t
        success = False
        if released_at is not None:
            for o in world.objects:
                pos, _ = o.pose
                if pos[1] < -0.25 and abs(pos[0]) < 0.25:
                    success = True
        elapsed = (released_at if released_at is not None else world.sim_time) - start
    reason = 'picked' if success else (phases[-1][2] if phases else 'nothing happened')
    if not success and released_at is not None:
        reason = 'released but no object at the drop pose'
    return EpisodeResult(success=success, time=float(elapsed),
                         commands_into_occupied=into_occupied, attempts=policy.attempts,
                         reason=reason, phases=phases,
                         wall_s=time.perf_counter() - wall0)


def summarise(results: list[EpisodeResult]) -> dict[str, float]:
    """Success rate, time per successful pick (p50/p90) and commands into occupied space."""
    ok = [r for r in results if r.success]
    times = [r.time for r in ok]
    return {
        'episodes': len(results),
        'success_rate': len(ok) / max(1, len(results)),
        'time_p50_s': float(np.median(times)) if times else math.nan,
        'time_p90_s': float(np.percentile(times, 90)) if times else math.nan,
        'commands_into_occupied': int(sum(r.commands_into_occupied for r in results)),
    }


def _one(job: tuple[int, str, str]) -> tuple[int, str, EpisodeResult]:
    seed, lighting, perception = job
    return seed, lighting, run_pick_episode(seed, lighting, perception=perception)


def main(argv: list[str] | None = None) -> int:
    """Run held-out episodes over every lighting condition and print the table."""
    import argparse
    import multiprocessing

    from edge_loop.sim.lighting import CONDITION_NAMES

    parser = argparse.ArgumentParser(description='closed-loop pick episodes (kernel level)')
    parser.add_argument('--episodes', type=int, default=100)
    parser.add_argument('--first-seed', type=int, default=800)
    parser.add_argument('--perception', choices=('vision', 'truth'), default='vision')
    parser.add_argument('--jobs', type=int, default=1)
    parser.add_argument('--verbose', action='store_true')
    args = parser.parse_args(argv)
    jobs = [(args.first_seed + i, CONDITION_NAMES[i % len(CONDITION_NAMES)], args.perception)
            for i in range(args.episodes)]
    t0 = time.perf_counter()
    if args.jobs > 1:
        with multiprocessing.Pool(args.jobs) as pool:
            done = pool.map(_one, jobs, chunksize=1)
    else:
        done = [_one(j) for j in jobs]
    print(f'## closed-loop pick episodes, held-out objects, perception={args.perception} '
          f'({time.perf_counter() - t0:.0f} s wall)\n')
    print('| lighting | episodes | success | time p50 s | commands into occupied |')
    print('|---|---|---|---|---|')
    for name in (*CONDITION_NAMES, 'all'):
        rows = [r for _, light, r in done if name in (light, 'all')]
        if not rows:
            continue
        s = summarise(rows)
        print(f'| {name} | {s["episodes"]} | {s["success_rate"]:.0%} | {s["time_p50_s"]:.1f} '
              f'| {s["commands_into_occupied"]} |')
    s = summarise([r for _, _, r in done])
    print(f'\nsuccess {s["success_rate"]:.1%} over {s["episodes"]} episodes; time per pick '
          f'p50 {s["time_p50_s"]:.1f} s, p90 {s["time_p90_s"]:.1f} s (simulated); commands into '
          f'occupied cells: {s["commands_into_occupied"]}')
    failures = [(seed, light, r) for seed, light, r in done if not r.success]
    if failures:
        print('\nfailures:')
        for seed, light, r in failures:
            print(f'- seed {seed} ({light}): {r.reason}; attempts {r.attempts}')
            if args.verbose:
                for ph in r.phases:
                    print(f'    {ph}')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
