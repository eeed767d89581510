# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""``edge-loop record``: scenario bags (rosbag2, MCAP, zstd chunks) from the simulator.

Scenarios:

- ``<lighting>`` (``nominal``, ``dim``, ``overexposed``, ``harsh_shadow``, ``color_cast``,
  ``glare``, ``flicker``, ``motion_blur``): the gripper parked out of view, ``--frames``
  camera frames.
- ``grasp_<lighting>``: ``--frames`` frames with the gripper parked, then a scripted grasp of
  the most visible object (ground-truth mask centroid, closing across its minor axis): the
  gripper comes into view, descends, closes, lifts; then two more frames. The joint states
  carry the real tactile trace (open -> closing -> holding).
- ``grasp_miss_<lighting>``: the same, but the grasp closes in empty space (closed_empty).

Every bag holds, on simulated time (first step at 1 s): at 15 Hz the colour image (rgb8),
aligned depth (16UC1 mm), camera_info and ground truth (/sim/objects, /sim/mask,
/sim/occupancy); at 240 Hz /gripper/joint_states, /arm/tcp_pose and /clock; and
/sim/grasp_outcome once a grasp is judged. Message time = header stamp. The same seed gives the
same bytes.

``--default`` writes the small embedded set (every lighting condition on held-out objects,
plus a held and a missed grasp) into ``--output`` (default ``data/scenarios``).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edge_loop import topics
from edge_loop.kernels.grasp_types import PlanarGrasp
from edge_loop.sim.lighting import CONDITION_NAMES

CAMERA_RATE_HZ = 15
STEPS_PER_FRAME = 240 // CAMERA_RATE_HZ
CLOCK_START_NS = 1_000_000_000


@dataclass(frozen=True)
class Scenario:
    """One entry of the embedded default set."""

    name: str
    seed: int
    frames: int
    approach: str = 'teleport'


# The embedded default set: held-out objects, a few frames each (kept under 20 MB).
DEFAULT_SET = tuple(
    [Scenario(name, 800 + i, 3 if name == 'flicker' else 2)
     for i, name in enumerate(CONDITION_NAMES)]
    + [Scenario('grasp_nominal', 900, 1), Scenario('grasp_miss_dim', 901, 1)])


def parse_scenario(name: str) -> tuple[str, str]:
    """(kind, lighting) of a scenario name; kind is 'static', 'grasp' or 'grasp_miss'."""
    kind, lighting = 'static', name
    for prefix, grasp_kind in (('grasp_miss_', 'grasp_miss'), ('grasp_', 'grasp')):
        if name.startswith(prefix):
            kind, lighting = grasp_kind, name[len(prefix):]
            break
    if lighting not in CONDITION_NAMES:
        known = ', '.join(CONDITION_NAMES)
        raise ValueError(f'unknown scenario {name!r}: lighting must be one of {known} '
                         f'(optionally prefixed grasp_ or grasp_miss_)')
    return kind, lighting


class _BagRecorder:
    """Writes the simulator's topics for every physics step of one world."""

    def __init__(self, world, writer) -> None:
        from edge_loop.sim import messages

        self.world, self.writer, self.msgs = world, writer, messages
        self.steps = 0
        self.frames = 0

    def t_ns(self) -> int:
        return self.msgs.step_ns(self.steps, CLOCK_START_NS)

    def frame(self) -> None:
        m, w, t = self.msgs, self.world, self.t_ns()
        frame = w.render()
        color, depth, info = m.frame_messages(frame, t)
        self.writer.write(topics.COLOR, t, color)
        self.writer.write(topics.DEPTH, t, depth)
        self.writer.write(topics.CAMERA_INFO, t, info)
        self.writer.write(topics.SIM_OBJECTS, t, m.sim_objects(w.visible_centroids(frame), t))
        self.writer.write(topics.SIM_MASK, t, m.image(frame.label, 'mono16', t))
        self.writer.write(topics.SIM_OCCUPANCY, t, m.occupancy(w.gt_occupancy(), t))
        self.frames += 1

    def state(self) -> None:
        m, g, t = self.msgs, self.world.gripper, self.t_ns()
        pos, vel, force = g.joint_state()
        xyz, yaw = g.tcp_pose()
        self.writer.write(topics.CLOCK, t, m.clock(t))
        self.writer.write(topics.JOINT_STATES, t,
                          m.joint_state(pos, vel, force, t, g.measured_shear()))
        self.writer.write(topics.TCP_POSE, t, m.tcp_pose(xyz, yaw, t))

    def after_step(self, world=None, phase: int = 0) -> None:
        """Call after every physics step: states every step, a frame every 16 steps."""
        self.steps += 1
        self.state()
        if self.steps % STEPS_PER_FRAME == 0:
            self.frame()

    def run(self, steps: int) -> None:
        for _ in range(steps):
            self.world.step()
            self.after_step()


def free_spot(world) -> np.ndarray:
    """A point in the tray interior as far as possible from every object (for a miss)."""
    xs, ys = np.meshgrid(np.linspace(-0.15, 0.15, 13), np.linspace(-0.10, 0.10, 9))
    cand = np.stack([xs.ravel(), ys.ravel()], axis=1)
    dist = np.full(len(cand), np.inf)
    for o in world.objects:
        d = np.linalg.norm(cand - o.pose[0][:2], axis=1) - np.max(o.size) / 2
        dist = np.minimum(dist, d)
    return cand[int(np.argmax(dist))]


def plan_grasp(world, kind: str) -> PlanarGrasp | None:
    """The scripted grasp of a grasp scenario (None: nothing visible to grasp)."""
    from edge_loop.sim.baselines import mask_centroid_grasp

    frame = world.render(peek=True)
    grasp = mask_centroid_grasp(world, frame)
    if kind == 'grasp_miss':
        xy = free_spot(world)
        yaw = grasp.yaw if grasp is not None else 0.0
        return PlanarGrasp(center=[xy[0], xy[1], 0.03], yaw=yaw, opening=0.06)
    return grasp


def record(scenario: str, seed: int, frames: int, output: Path, *, split: str = 'heldout',
           n_objects: int | None = None, approach: str = 'move', shake: bool = False,
           compress: bool = True) -> dict:
    """Record one scenario bag at ``output``; returns a summary dict."""
    from edge_loop.bags import BagWriter
    from edge_loop.sim import messages
    from edge_loop.sim.grasp_trial import execute_grasp
    from edge_loop.sim.world import SimWorld

    kind, lighting = parse_scenario(scenario)
    if kind != 'static' and n_objects is None:
        n_objects = 2
    summary = {'scenario': scenario, 'seed': seed, 'path': str(output)}
    with SimWorld(seed, n_objects=n_objects, split=split, lighting=lighting) as world, \
            BagWriter(output, compress=compress) as writer:
        grasp = plan_grasp(world, kind) if kind != 'static' else None
        rec = _BagRecorder(world, writer)
        rec.state()
        rec.frame()
        rec.run(STEPS_PER_FRAME * max(frames - 1, 0))
        if kind != 'static':
            if grasp is None:
                raise ValueError(f'scenario {scenario} seed {seed}: no object visible to grasp')
            result = execute_grasp(world, grasp, lift=0.10, shake=shake, approach=approach,
                                   speed=0.25, approach_height=0.06, on_step=rec.after_step)
            rec.run(2 * STEPS_PER_FRAME)
            t = rec.t_ns()
            writer.write(topics.SIM_GRASP_OUTCOME, t, messages.grasp_outcome(
                result.success, result.reason, t,
                {'object': str(result.object_k), 'seed': str(seed)}))
            summary.update(success=result.success, reason=result.reason)
        summary.update(frames=rec.frames, steps=rec.steps,
                       objects=[o.name for o in world.objects])
    summary['bytes'] = sum(f.stat().st_size for f in output.rglob('*') if f.is_file())
    return summary


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``edge-loop record``."""
    parser.add_argument('--scenario', default='nominal',
                        help='lighting name (nominal, glare, ...), grasp_<lighting> or '
                             'grasp_miss_<lighting>')
    parser.add_argument('--seed', type=int, default=0, help='scene seed')
    parser.add_argument('--frames', type=int, default=15,
                        help='camera frames (grasp scenarios: frames before the grasp)')
    parser.add_argument('--output', type=Path, default=None,
                        help='bag folder to create (--default: parent folder, default '
                             'data/scenarios)')
    parser.add_argument('--split', choices=('train', 'heldout'), default='heldout')
    parser.add_argument('--n-objects', type=int, default=None,
                        help='objects in the scene (default: from the seed; 2 for grasps)')
    parser.add_argument('--approach', choices=('move', 'teleport'), default='move',
                        help='grasps: fly the gripper in from its parked pose, or start it '
                             'above the object')
    parser.add_argument('--shake', action='store_true', help='shake after the lift (grasps)')
    parser.add_argument('--default', action='store_true',
                        help='write the embedded default scenario set into --output')
    parser.add_argument('--force', action='store_true', help='replace existing bags')
    parser.add_argument('--count', type=int, default=1,
                        help='a bag set: seeds --seed .. --seed+COUNT-1 of every scenario of '
                             '--scenario (comma-separated), as <output>/<scenario>_s<seed> '
                             '(default output reports/bagset; edge-loop regress, docs/fleet.md)')


def _prepare(path: Path, force: bool) -> None:
    if path.exists():
        if not force:
            raise FileExistsError(f'{path} exists; pass --force to replace it')
        shutil.rmtree(path)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``edge-loop record``."""
    try:
        if args.default:
            out = args.output or Path('data/scenarios')
            jobs = [(s.name, s.seed, s.frames, s.approach, out / s.name) for s in DEFAULT_SET]
        elif args.count > 1 or ',' in args.scenario:
            names = [n.strip() for n in args.scenario.split(',') if n.strip()]
            for name in names:
                parse_scenario(name)
            out = args.output or Path('reports/bagset')   # git-ignored: a set is large
            jobs = [(name, seed, args.frames, args.approach, out / f'{name}_s{seed}')
                    for seed in range(args.seed, args.seed + max(args.count, 1))
                    for name in names]
        else:
            parse_scenario(args.scenario)
            out = args.output or Path('data/scenarios') / f'{args.scenario}_s{args.seed}'
            jobs = [(args.scenario, args.seed, args.frames, args.approach, out)]
        for *_, path in jobs:
            _prepare(path, args.force)
        total = 0
        for name, seed, frames, approach, path in jobs:
            t0 = time.monotonic()
            s = record(name, seed, frames, path, split=args.split, n_objects=args.n_objects,
                       shake=args.shake, approach=approach)
            total += s['bytes']
            extra = f" grasp={s['reason']}" if 'reason' in s else ''
            print(f"{path}: {s['frames']} frames, {s['steps']} steps, "
                  f"{s['bytes'] / 1e6:.2f} MB, {time.monotonic() - t0:.1f} s{extra}")
        print(f'total {total / 1e6:.2f} MB')
    except (ValueError, FileExistsError) as exc:
        print(f'edge-loop record: {exc}', file=sys.stderr)
        return 2
    return 0
