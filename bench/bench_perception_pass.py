# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Per-frame CPU of perception: the locator run twice (before) against once (now), side by side.

Before (up to commit 2abb9b7) object_locator ran the locator kernel on every frame and
grasp_planner ran it again on the same frame before planning. Now the locator runs once and
hands its segmentation on (``/edge_loop/labels``); the planner computes its depth geometry and
plans on the locator's centroids and label image. This times both pipelines' node work on the
same simulated frames, interleaved frame by frame (so machine load hits both alike), as thread
CPU time (``time.thread_time_ns``):

- before: locator = locate + rank; planner = locate + plan (``plan_grasp(objects=...)``);
- now: locator = locate + rank + label image + Image message; planner = height scene and
  obstacles + label message decode + segments + plan (``plan_grasp_segmented``), plus one
  CDR serialise + deserialise of the label message: the copies the middleware makes.

It checks that both give the same grasps bit for bit on every frame. DDS delivery itself is
not in the figures.

    python bench/bench_perception_pass.py                  # 3 scenes x 8 lighting, 5 rounds
    python bench/bench_perception_pass.py --scenes 1 --rounds 2
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from geometry_msgs.msg import Pose, PoseArray
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import Image
from std_msgs.msg import Header

from edge_loop.kernels.grasp_planner import grasp_scene, plan_grasp, plan_grasp_segmented
from edge_loop.kernels.object_locator import (
    DEFAULT_PARAMS,
    label_image,
    locate_objects,
    rank_targets,
    segments_from_labels,
)
from edge_loop.nodes.vision_common import labels_from_message, labels_message
from edge_loop.sim.lighting import CONDITIONS
from edge_loop.sim.world import SimWorld


def sim_frames(n_scenes: int, first_seed: int = 300000) -> list[tuple]:
    """(name, colour, depth mm, intrinsics, extrinsics) for every lighting of each scene."""
    frames = []
    for seed in range(first_seed, first_seed + n_scenes):
        with SimWorld(seed, split='train', n_objects=4) as world:
            for cond in CONDITIONS:
                world.set_lighting(cond)
                f = world.render()
                frames.append((f'{seed} {cond}', f.color, f.depth_mm, f.intrinsics,
                               world.extrinsics))
    return frames


def _cpu_ms(fn):
    t0 = time.thread_time_ns()
    out = fn()
    return out, (time.thread_time_ns() - t0) / 1e6


def before(color, depth, intr, ext) -> tuple[list, float, float]:
    """(grasps, locator ms, planner ms) of the two-pass pipeline."""
    def locator():
        objects = locate_objects(color, depth, intr, ext, DEFAULT_PARAMS)
        rank_targets(objects, DEFAULT_PARAMS.tie_height)
        return objects

    def planner():
        objects = locate_objects(color, depth, intr, ext, DEFAULT_PARAMS)
        return plan_grasp(depth, intr, ext, locator_params=DEFAULT_PARAMS, objects=objects)

    _, loc_ms = _cpu_ms(locator)
    grasps, plan_ms = _cpu_ms(planner)
    return grasps, loc_ms, plan_ms


def now(color, depth, intr, ext) -> tuple[list, float, float]:
    """(grasps, locator ms, planner ms) of the one-pass pipeline."""
    header = Header()

    def locator():
        objects = locate_objects(color, depth, intr, ext, DEFAULT_PARAMS)
        rank_targets(objects, DEFAULT_PARAMS.tie_height)
        poses = PoseArray(header=header, poses=[Pose() for _ in objects])
        for pose, obj in zip(poses.poses, objects):
            pose.position.x, pose.position.y, pose.position.z = (float(v) for v in obj.position)
        msg = labels_message(label_image(objects, intr.height, intr.width), header)
        return poses, serialize_message(msg)

    (poses, wire), loc_ms = _cpu_ms(locator)

    def planner():
        scene, obstacles = grasp_scene(depth, intr, ext)
        labels = labels_from_message(deserialize_message(wire, Image))
        positions = np.array([[p.position.x, p.position.y, p.position.z] for p in poses.poses],
                             np.float64).reshape(-1, 3)
        return plan_grasp_segmented(scene, obstacles, positions,
                                    segments_from_labels(labels, len(positions)))

    grasps, plan_ms = _cpu_ms(planner)
    return grasps, loc_ms, plan_ms


def _key(grasps: list) -> list:
    return [(tuple(np.asarray(g.center).tolist()), g.yaw, g.opening, g.quality) for g in grasps]


def main() -> int:
    """Print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--scenes', type=int, default=3)
    ap.add_argument('--rounds', type=int, default=5)
    args = ap.parse_args()
    frames = sim_frames(args.scenes)
    times = {k: [] for k in ('before locator', 'before planner', 'now locator', 'now planner')}
    totals = {'before': [], 'now': []}
    for r in range(args.rounds):
        for _name, color, depth, intr, ext in frames:
            runs = (('before', before), ('now', now))
            for label, fn in (runs if r % 2 == 0 else runs[::-1]):
                grasps, loc_ms, plan_ms = fn(color, depth, intr, ext)
                times[f'{label} locator'].append(loc_ms)
                times[f'{label} planner'].append(plan_ms)
                totals[label].append(loc_ms + plan_ms)
                if label == 'before':
                    want = _key(grasps)
                else:
                    got = _key(grasps)
            if got != want:
                raise SystemExit(f'grasps differ on {_name}')
    print(f'{len(frames)} sim frames x {args.rounds} rounds, thread CPU ms per frame '
          '(interleaved; same grasps bit for bit on every frame)')
    print(f'{"":18s} {"p50":>7s} {"p99":>7s} {"mean":>7s}')
    for k, v in list(times.items()) + [(f'{k} total', v) for k, v in totals.items()]:
        print(f'{k:18s} {np.median(v):7.2f} {np.percentile(v, 99):7.2f} {np.mean(v):7.2f}')
    ratio = np.array(totals['now']) / np.array(totals['before'])
    lo, hi = np.percentile(ratio, [2.5, 97.5])
    print(f'now / before per frame: median {np.median(ratio):.3f} '
          f'(95% of frames {lo:.3f}-{hi:.3f})')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
