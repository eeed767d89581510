# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Fast mode: one scenario bag through the perception kernels in lock-step, frame by frame.

Each camera frame of the bag (colour, aligned depth, camera_info of one stamp) goes through
what the nodes run on it: :func:`locate_objects` (object_locator), :func:`plan_grasp` on the
locator's objects (grasp_planner) and :class:`OccupancyMapper` (occupancy_mapper, fused over
the bag). Each frame gives one JSON-able record: the outputs, their errors against the bag's
ground truth (/sim/objects, /sim/mask, /sim/occupancy; a robot's bag without it gets outputs
only) and the kernels' times under ``timing`` (the only field that differs between two runs of
the same bag). Pure: no rclpy node, no Ray; a bag that cannot be replayed raises
:class:`BadBagError` with its reason.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from edge_loop import regression, topics
from edge_loop.bags import BagError, BagReader, deserialize, find_camera_topics
from edge_loop.images import ImageFormatError, image_to_array, to_rgb
from edge_loop.kernels.camera import Extrinsics, Intrinsics
from edge_loop.kernels.grasp_planner import GraspParams, plan_grasp
from edge_loop.kernels.grasp_types import grasp_rectangle
from edge_loop.kernels.object_locator import LocatorParams, locate_objects
from edge_loop.kernels.occupancy import OccupancyMapper

CAMERA_TYPES = {'color': 'sensor_msgs/msg/Image', 'depth': 'sensor_msgs/msg/Image',
                'info': 'sensor_msgs/msg/CameraInfo'}
TRUTH_TOPICS = {topics.SIM_OBJECTS: 'objects', topics.SIM_MASK: 'mask',
                topics.SIM_OCCUPANCY: 'occupancy'}


class BadBagError(Exception):
    """A bag this replay cannot use; ``kind`` is 'corrupt' or 'schema', the message says why."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


def _ns(stamp: Any) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def _camera_topics(reader: BagReader) -> dict[str, str]:
    try:
        found = find_camera_topics(reader.topics)
    except BagError as exc:
        raise BadBagError('schema', str(exc)) from None
    if not found:
        raise BadBagError('schema', f'no camera topics (needs raw colour, aligned depth and '
                     f'camera_info, e.g. {topics.COLOR}); the bag has '
                     f'{", ".join(sorted(reader.topics)) or "no topics"}')
    for role, topic in found.items():
        if reader.topics[topic] != CAMERA_TYPES[role]:
            raise BadBagError('schema', f'{topic} is {reader.topics[topic]}, expected '
                         f'{CAMERA_TYPES[role]}')
    return found


def _frames(reader: BagReader, camera: dict[str, str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(stamp ns, {'color', 'depth', 'info', 'objects', 'mask', 'occupancy': msg}) in order."""
    role_of = {topic: role for role, topic in camera.items()}
    role_of.update({t: r for t, r in TRUTH_TOPICS.items() if t in reader.topics})
    pending: dict[int, dict[str, Any]] = {}
    for m in reader.messages(role_of):
        msg = deserialize(m.data, m.msgtype)
        stamp = _ns(msg.header.stamp)
        pending.setdefault(stamp, {})[role_of[m.topic]] = msg
        # Messages of one frame are written together: a frame is complete once all its
        # parts are in, and frames come out in order of their stamps.
        for done in sorted(s for s, parts in pending.items() if len(parts) == len(role_of)):
            yield done, pending.pop(done)
    for stamp in sorted(pending):
        if all(r in pending[stamp] for r in camera):
            yield stamp, pending[stamp]


def default_params() -> dict[str, Any]:
    """Replay parameters: camera pose (config/pick.yaml), kernel overrides, frame gates."""
    import yaml

    from edge_loop.paths import config_path

    shared = yaml.safe_load(config_path('pick.yaml').read_text())['/**']['ros__parameters']
    gates = yaml.safe_load(config_path('regression.yaml').read_text())['gates']
    return {'camera_position': list(shared['camera_position']),
            'camera_orientation': list(shared['camera_orientation']),
            'locator': {}, 'grasp': {},
            'gates': {k: gates[k] for k in ('object_match_radius_m', 'grasp_mask_tolerance_px',
                                            'max_opening_m', 'max_false_detections')}}


def _locator_params(overrides: dict[str, Any]) -> LocatorParams:
    return LocatorParams(**{k: tuple(v) if isinstance(v, list) else v
                            for k, v in overrides.items()})


def _round(x: float, digits: int = 6) -> float:
    return float(round(float(x), digits))


def replay_frames(path: str | Path, params: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Per-frame records of one bag (see the module docstring); raises BadBagError."""
    ext = Extrinsics.from_params(params['camera_position'], params['camera_orientation'])
    lp, gp = _locator_params(params['locator']), GraspParams(**params['grasp'])
    gates = params['gates']
    mapper = OccupancyMapper()
    try:
        with BagReader(path) as reader:
            camera = _camera_topics(reader)
            for index, (stamp, parts) in enumerate(_frames(reader, camera)):
                yield _frame_record(index, stamp, parts, ext, lp, gp, gates, mapper)
    except BagError as exc:
        raise BadBagError('corrupt', str(exc)) from None


def _frame_record(index: int, stamp: int, parts: dict[str, Any], ext: Extrinsics,
                  lp: LocatorParams, gp: GraspParams, gates: dict[str, Any],
                  mapper: OccupancyMapper) -> dict[str, Any]:
    info = parts['info']
    try:
        intr = Intrinsics.from_k(info.k, info.width, info.height)
        color = to_rgb(image_to_array(parts['color']), parts['color'].encoding)
        depth = image_to_array(parts['depth'])
    except (ImageFormatError, ValueError) as exc:
        raise BadBagError('schema', f'frame {index} (stamp {stamp}): {exc}') from None
    t0 = time.perf_counter()
    objects = locate_objects(color, depth, intr, ext, lp)
    t1 = time.perf_counter()
    grasps = plan_grasp(depth, intr, ext, params=gp, objects=objects)
    t2 = time.perf_counter()
    grid = mapper.update(depth, intr, ext)
    t3 = time.perf_counter()
    detected = np.array([o.position for o in objects], np.float64).reshape(-1, 3)
    corners = grasp_rectangle(grasps[0]) if grasps else None
    timing = {'locator_ms': _round((t1 - t0) * 1e3, 3), 'grasp_ms': _round((t2 - t1) * 1e3, 3),
              'occupancy_ms': _round((t3 - t2) * 1e3, 3),
              'total_ms': _round((t3 - t0) * 1e3, 3)}
    return judge_frame(index, stamp, parts, detected, corners, grid, intr, ext, gates, timing)


def judge_frame(index: int, stamp: int, parts: dict[str, Any], detected: np.ndarray,
                corners: np.ndarray | None, grid: np.ndarray | None, intr: Intrinsics,
                ext: Extrinsics, gates: dict[str, Any],
                timing: dict[str, float]) -> dict[str, Any]:
    """One frame's record from what the loop answered (objects, grasp rectangle, grid).

    Shared by fast mode (the kernels' outputs) and graph mode (the nodes' messages), so both
    are judged by the same code against the bag's ground truth in ``parts``.
    """
    detected = np.asarray(detected, np.float64).reshape(-1, 3)
    record: dict[str, Any] = {
        'index': index, 'stamp_ns': stamp,
        'detected': [[_round(v) for v in p] for p in detected],
        'grasp': None, 'truth': 'objects' in parts, 'timing': timing}
    if corners is not None:
        record['grasp'] = [[_round(v) for v in c] for c in corners]
    if 'objects' in parts:
        truth = np.array([[p.position.x, p.position.y, p.position.z]
                          for p in parts['objects'].poses], np.float64).reshape(-1, 3)
        errors, missed, false = regression.match_objects(detected, truth,
                                                         gates['object_match_radius_m'])
        record.update(n_truth=len(truth), missed=missed, false=false,
                      errors_mm=[_round(e * 1e3, 3) for e in errors])
        mask = np.array(image_to_array(parts['mask'])) if 'mask' in parts else None
        frame_truth = {stamp: regression.FrameTruth(stamp, truth, mask, None)}
        record['grasp_issues'] = [s.split(': ', 2)[-1] for s in regression.grasp_gate(
            {stamp: corners}, frame_truth, intr, ext, gates, 'bag')]
    if 'occupancy' in parts:
        msg = parts['occupancy']
        truth_grid = np.asarray(msg.data, np.int8).reshape(msg.info.height,
                                                           msg.info.width) >= 50
        record['occupancy_iou'] = (_round(regression.iou(grid >= 50, truth_grid))
                                   if grid is not None and grid.shape == truth_grid.shape
                                   else None)
    return record


def bag_frame(path: str | Path, index: int) -> tuple[np.ndarray, Intrinsics] | None:
    """(RGB image, intrinsics) of frame ``index`` of a bag, for an overlay; None if gone."""
    try:
        with BagReader(path) as reader:
            camera = _camera_topics(reader)
            for i, (_, parts) in enumerate(_frames(reader, camera)):
                if i == index:
                    info = parts['info']
                    return (np.array(to_rgb(image_to_array(parts['color']),
                                            parts['color'].encoding)),
                            Intrinsics.from_k(info.k, info.width, info.height))
    except (BagError, BadBagError, ImageFormatError, ValueError):
        return None
    return None
