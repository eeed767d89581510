# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""grasp_planner: the best top-down parallel-jaw grasp for the next object, from RGB-D frames.

One perception pass per frame: this node does not run the object locator. It plans on the
locator's result for the same frame, ``/edge_loop/objects`` (PoseArray: centroids) plus
``/edge_loop/labels`` (the label image they rest on), paired with the frame by exact header
stamp (:class:`~edge_loop.nodes.vision_common.PerceptionPairing`, within ``pairing_window_ms``
of stamps, so a starved machine whose locator runs frames behind still pairs). When the frame
arrives it computes what needs only depth (height scene, obstacle points), so the frame's
shared-memory sample is given back at once; when the locator's result for that stamp is in, it
tries the objects in the locator's picking order
(:func:`~edge_loop.kernels.object_locator.rank_positions`) and plans for the first with a
collision-free grasp, so it normally grasps the object on ``/edge_loop/object``. A frame whose
locator result never comes gets no grasp, and the ``/diagnostics`` entry ``grasp_planner:
input`` says how many (WARN; never a grasp paired with another frame's objects).

``device`` (``cpu`` | ``cuda`` | ``cuda:N`` | ``auto``) places the candidate scoring: on a GPU
the frame's depth goes to the device when the frame arrives (one transfer; the height scene
for the targets' points stays on the CPU) and each target's candidates are scored there by
``kernels.gpu.grasp.TargetScorer``, gated as ``grasp_planner.score.cuda.float32``; the
transfers per frame go out on ``/diagnostics`` (``transfers_per_frame: ...``).

Outputs, stamped with the frame's stamp in ``world_frame``: ``/edge_loop/grasp``
(PolygonStamped: the contract's jaw rectangle; a polygon without points when there is no
grasp), ``/edge_loop/grasp_alternatives`` (PolygonStamped: the next ``alternatives`` ranked
jaw rectangles, 4 points each, best first; published just before the grasp, for the pick
controller to fall back on when its occupancy check refuses the best) and the ranked
candidates as RViz markers on ``/edge_loop/markers`` (namespace ``grasp_candidates``: the
best in green, the others fading). Bad frames: warning + ``/diagnostics``, no output (the
checks of :mod:`edge_loop.nodes.vision_common`).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from geometry_msgs.msg import Point, Point32, Polygon, PolygonStamped, PoseArray
from std_msgs.msg import ColorRGBA, Header
from visualization_msgs.msg import Marker, MarkerArray

from edge_loop import topics
from edge_loop.kernels.camera import nominal_intrinsics
from edge_loop.kernels.grasp_planner import GraspParams, grasp_scene, plan_grasp_segmented
from edge_loop.kernels.grasp_types import GRASP_ALTERNATIVES, PlanarGrasp, grasp_rectangle
from edge_loop.kernels.object_locator import (
    DEFAULT_PARAMS,
    check_inputs,
    height_scene,
    segments_from_labels,
)
from edge_loop.nodes.stage_base import ConfigError, Param, StageNode, run_node
from edge_loop.nodes.stage_health import StageHealth, check_deployable_or_fail
from edge_loop.nodes.vision_common import (
    GATE_PARAMS,
    BadFrameError,
    LabelReader,
    PerceptionPairing,
    delete_all,
    extrinsics_from,
    frame_inputs,
    stamp_ns,
)
from edge_loop.placement import PlacementError, device_error, resolve_device

OP_NAME = 'grasp_planner'
GPU_OP_NAME = 'grasp_planner.score.cuda.float32'
_GP = GraspParams()   # the kernel's defaults: one source for the node's parameter defaults

# The locator's result for a frame normally comes a few ms after the frame; on a starved machine
# it can be several frames behind, so pairing waits by stamp (pairing_window_ms), not by a
# count of frames. This many pending stamps only bounds memory (1 s of frames at 30 Hz).
PAIRING_MAX_PENDING = 32


def grasp_polygon(grasp: PlanarGrasp | None, header: Header) -> PolygonStamped:
    """The jaw rectangle (p0..p3) of ``grasp``; no points when there is none."""
    return grasps_polygon([] if grasp is None else [grasp], header)


def grasps_polygon(grasps: list[PlanarGrasp], header: Header) -> PolygonStamped:
    """The jaw rectangles of ``grasps`` one after the other (4 points each)."""
    msg = PolygonStamped(header=header, polygon=Polygon())
    msg.polygon.points = [Point32(x=float(c[0]), y=float(c[1]), z=float(c[2]))
                          for g in grasps for c in grasp_rectangle(g)]
    return msg


def candidate_markers(grasps: list[PlanarGrasp], header: Header, limit: int) -> MarkerArray:
    """Closed line strips of the ranked jaw rectangles (best first, green)."""
    out = MarkerArray(markers=[delete_all('grasp_candidates', header)])
    for i, g in enumerate(grasps[:limit]):
        m = Marker(header=header, ns='grasp_candidates', id=i, type=Marker.LINE_STRIP,
                   action=Marker.ADD)
        m.pose.orientation.w = 1.0
        m.scale.x = 0.003 if i == 0 else 0.0015
        fade = 1.0 - i / max(limit, 1)
        m.color = (ColorRGBA(r=0.1, g=1.0, b=0.2, a=1.0) if i == 0
                   else ColorRGBA(r=0.3, g=0.5, b=1.0, a=0.3 + 0.5 * fade))
        corners = grasp_rectangle(g)
        m.points = [Point(x=float(c[0]), y=float(c[1]), z=float(c[2]))
                    for c in list(corners) + [corners[0]]]
        out.markers.append(m)
    return out


class GraspPlannerNode(StageNode):
    """Lifecycle stage planning grasps on the locator's result for every frame."""

    PARAMS = GATE_PARAMS + (
        Param('max_opening', 0.085, 'Largest jaw opening (m)', min=0.01, max=0.3, tier='user'),
        Param('finger_width', 0.02, 'Finger-pad width across the closing direction (m)',
              min=0.001, max=0.1, tier='user'),
        Param('finger_thickness', 0.012, 'Finger extent along the closing direction (m): the '
              'footprint kept free of obstacles outside the opening', min=0.001, max=0.1,
              tier='user'),
        Param('pad_half_height', 0.015, 'Pad middle (the grasp point) to fingertip (m)',
              min=0.001, max=0.1, tier='user'),
        Param('min_height', 0.009, "Workspace floor: the object_locator's min_height (tray floor "
              '+ 4 mm of depth noise). Points above it are obstacles to the fingers; the '
              'fingertips stay above the tray floor under it', min=0.0, max=0.2, tier='user'),
        Param('clearance', 0.012, 'Added to the object width on each side (m)', min=0.0,
              max=0.05),
        Param('grasp_depth', _GP.grasp_depth, 'Pad middle below the top of the grasped band (m)',
              min=0.0, max=0.1),
        Param('n_angles', 24, 'Closing directions sampled over 180 degrees', min=2, max=180),
        Param('candidate_markers', 10, 'Candidates shown in RViz', min=0, max=100, tier='internal'),
        Param('alternatives', GRASP_ALTERNATIVES,
              'Next-best grasps published on /edge_loop/grasp_alternatives (0: an empty polygon)',
              min=0, max=50),
        Param('device', 'cpu', 'Where the candidate scoring runs: cpu, cuda, cuda:N or auto (a '
              'GPU where torch sees one; gated as grasp_planner.score.cuda.float32; see '
              'docs/placement.md)', check=device_error),
        Param('warmup_size', [640, 480], 'Camera size (width, height) whose GPU graph is '
              'captured at configure; a frame of another size captures its own on arrival '
              '(one slow frame). Ignored on the CPU', length=2, min=1, max=8192),
        Param('diagnostics_period_s', 1.0, 'Period of the /diagnostics summary (s)', min=0.1,
              max=60.0, tier='internal'),
        Param('pairing_window_ms', 500.0,
              "How long (in camera stamps) a frame waits for the locator's result: a frame "
              'without it once a frame this much newer came is reported (no locator result). '
              "500 ms: a grasp older than the controller's stale_s (0.5 s) is of no use",
              min=10.0, max=10000.0),
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('grasp_planner', **kwargs)
        self._health: StageHealth | None = None
        self._pubs: dict[str, Any] = {}
        self._subs: list[Any] = []
        self._labels: LabelReader | None = None
        self._pairing: PerceptionPairing | None = None
        self._missing_reported = 0
        self._scorer: Any = None

    def configure_stage(self) -> None:
        """Gate, parameters, placement, publishers, the locator's result."""
        check_deployable_or_fail(self, [OP_NAME])
        p = self.params
        try:
            where = resolve_device(p['device'])
        except PlacementError as exc:
            raise ConfigError(str(exc)) from exc
        self._scorer = None
        if where.is_accelerator:
            # torch only where a GPU is asked for: a CPU-only robot needs no torch
            from edge_loop.kernels.gpu.grasp import TargetScorer
            from edge_loop.kernels.gpu.transfer import CopyLedger

            check_deployable_or_fail(self, [GPU_OP_NAME])
            self._scorer = TargetScorer(where.device, ledger=CopyLedger())
        self.get_logger().info(f'grasp scoring on {where.device} ({where.reason})')
        self._ext = extrinsics_from(p, self)
        self._gp = GraspParams.for_workspace(
            p['min_height'], max_opening=p['max_opening'], finger_width=p['finger_width'],
            finger_thickness=p['finger_thickness'], pad_half_height=p['pad_half_height'],
            clearance=p['clearance'], grasp_depth=p['grasp_depth'], n_angles=p['n_angles'])
        if self._scorer is not None:
            t0 = time.perf_counter()
            width, height = p['warmup_size']
            self._scorer.warm_up(nominal_intrinsics(width, height), self._ext, self._gp)
            self.get_logger().info(f'GPU graph for {width}x{height} frames captured in '
                                   f'{(time.perf_counter() - t0) * 1e3:.0f} ms')
        self._frame_id = p['world_frame']
        self._pubs = {
            'grasp': self.create_lifecycle_publisher(PolygonStamped, topics.GRASP, 10),
            'alternatives': self.create_lifecycle_publisher(PolygonStamped,
                                                            topics.GRASP_ALTERNATIVES, 10),
            'markers': self.create_lifecycle_publisher(MarkerArray, topics.MARKERS, 10),
        }
        self._health = StageHealth(self, 'grasp_planner')
        self._health.ledger = self._scorer.ledger if self._scorer is not None else None
        # Subscribed at configure so that discovery is done by the first active frame; the
        # callbacks drop what comes while inactive (no pairing then).
        self._subs = [
            self.create_subscription(PoseArray, topics.OBJECTS,
                                     lambda m: self._on_part('objects', m), 10),
        ]
        self._labels = LabelReader(self, self._on_labels)

    def activate_stage(self) -> None:
        """Start reading frames."""
        self._pairing = PerceptionPairing(
            PAIRING_MAX_PENDING, window_ns=int(self.params['pairing_window_ms'] * 1e6))
        self._missing_reported = 0
        self.open_frames(self._on_frame, self._summary)

    def deactivate_stage(self) -> None:
        """Stop reading frames."""
        self.close_frames()
        self._pairing = None

    def release(self) -> None:
        """Close the reader, destroy the subscriptions and publishers (idempotent)."""
        self.close_frames()
        self._pairing = None
        for sub in self._subs:
            self.destroy_subscription(sub)
        self._subs = []
        labels, self._labels = self._labels, None
        if labels is not None:
            labels.close()
        for pub in self._pubs.values():
            self.destroy_publisher(pub)
        self._pubs = {}
        if self._health is not None:
            self.destroy_publisher(self._health.pub)
            self._health = None

    def _summary(self) -> None:
        health, pairing = self._health, self._pairing
        if health is None:
            return
        if pairing is not None and pairing.missing > self._missing_reported:
            new, self._missing_reported = (pairing.missing - self._missing_reported,
                                           pairing.missing)
            health.bad_frame(f'no locator result: {new} frame(s) without /edge_loop/objects + '
                             f'{topics.LABELS} of their stamp ({pairing.missing} in all; is '
                             'object_locator running?)', None)
            return
        health.summary(self.frame_reader)

    def _on_frame(self, frame: Any) -> None:
        health, pairing = self._health, self._pairing
        if health is None or pairing is None or not self._pubs:
            return
        t0 = time.perf_counter()
        try:
            color, depth, intr = frame_inputs(frame)
            health.audit(frame, color, depth)
            depth_on_device = None
            if self._scorer is None:
                scene, obstacles = grasp_scene(depth, intr, self._ext, self._gp)
            else:   # obstacles are found on the device, from the depth sent there now
                check_inputs(None, depth, intr)
                scene, obstacles = height_scene(depth, intr, self._ext), None
                depth_on_device = self._scorer.depth_to_device(depth)
        except (BadFrameError, ValueError) as exc:
            health.bad_frame(str(exc), frame.stamp)
            return
        # Depth-derived arrays only: the frame (its shared-memory sample) is not kept.
        work = (scene, obstacles, depth_on_device, intr, (time.perf_counter() - t0) * 1e3)
        self._complete(pairing.add('frame', frame.stamp_ns, work), frame.stamp)

    def _on_labels(self, stamp: int, labels: Any) -> None:
        pairing = self._pairing
        if pairing is not None:
            self._complete(pairing.add('labels', stamp, labels), None)

    def _on_part(self, kind: str, msg: Any) -> None:
        pairing = self._pairing
        if pairing is None:
            return
        self._complete(pairing.add(kind, stamp_ns(msg.header.stamp), msg), msg.header.stamp)

    def _complete(self, parts: dict[str, Any] | None, stamp: Any) -> None:
        health = self._health
        if parts is None or health is None or not self._pubs:
            return
        t0 = time.perf_counter()
        scene, obstacles, depth_on_device, intr, frame_ms = parts['frame']
        poses = parts['objects'].poses
        try:
            labels = parts['labels']
            if labels.shape != (intr.height, intr.width):
                raise ValueError(f'label image {labels.shape[1]}x{labels.shape[0]} but the '
                                 f'frame is {intr.width}x{intr.height}')
            positions = np.array([[p.position.x, p.position.y, p.position.z] for p in poses],
                                 np.float64).reshape(-1, 3)
            score = None
            if depth_on_device is not None:
                def score(points, depth_t=depth_on_device, intr=intr):
                    return self._scorer.plan(depth_t, intr, self._ext, points, self._gp)
            grasps = plan_grasp_segmented(scene, obstacles, positions,
                                          segments_from_labels(labels, len(poses)), self._gp,
                                          DEFAULT_PARAMS.tie_height, score=score)
        except ValueError as exc:
            health.bad_frame(f'locator result unusable: {exc}', stamp)
            return
        self.debug_delay()
        header = Header(stamp=parts['objects'].header.stamp, frame_id=self._frame_id)
        # the alternatives first: the controller steps on the grasp and looks them up then
        self._pubs['alternatives'].publish(
            grasps_polygon(grasps[1:1 + self.params['alternatives']], header))
        self._pubs['grasp'].publish(grasp_polygon(grasps[0] if grasps else None, header))
        self._pubs['markers'].publish(candidate_markers(grasps, header,
                                                        self.params['candidate_markers']))
        # CPU of this stage for the frame: the depth part plus the planning part.
        health.processed(frame_ms + (time.perf_counter() - t0) * 1e3)


def main(args: list[str] | None = None) -> int:
    """Run the grasp_planner node."""
    return run_node(GraspPlannerNode, args)


if __name__ == '__main__':
    main()
