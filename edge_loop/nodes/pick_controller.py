# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""pick_controller: drives the pick from perception, occupancy and touch.

See docs/pick_controller.md for the commands and phases.
Inputs: ``/edge_loop/grasp`` (PolygonStamped: the jaw rectangle; one per camera frame, it is
the loop's clock; an empty polygon = nothing found), ``/edge_loop/grasp_alternatives``
(PolygonStamped, 4 points per rectangle: the planner's next-best grasps of the same frame,
matched by stamp, tried in order when the occupancy check refuses the best),
``/edge_loop/objects`` (PoseArray: every object of the frame; the one under the grasp of the
same stamp is the policy's ``target``, for information),
``/edge_loop/occupancy`` (OccupancyGrid), ``/edge_loop/grasp_state`` (DiagnosticArray, status
``grasp_state``), ``/arm/tcp_pose`` (PoseStamped, world); the last two at the gripper's rate,
so their newest message is sampled when a grasp message arrives
(:mod:`edge_loop.nodes.sampled_inputs`). On every grasp message it runs
:meth:`edge_loop.kernels.policy.PickPolicy.step` with ``now`` = that message's stamp and
publishes, stamped with it: ``/edge_loop/cmd/arm`` (TwistStamped, frame ``world_frame``: TCP
linear velocity m/s, angular.z yaw rate rad/s; all zero = hold still), ``/edge_loop/cmd/gripper``
(JointState: name ``gripper``, position = target opening m, effort = max grip force N) and a
text marker with the phase on ``/edge_loop/markers`` (namespace ``pick_controller``).
Stale inputs (older than ``stale_s`` against the frame stamp) make it command zero twist. An
unusable input message (NaN, wrong size, unknown frame) is ignored with a throttled warning
and a ``/diagnostics`` entry.

Safe stops: this node is the only writer of the command topics. The deadline monitor asks for
a stop on ``/edge_loop/safe_stop`` (:mod:`edge_loop.nodes.safe_stop`); the controller answers
at once, from a callback group of its own (a policy step in progress, even a slow one, does
not hold it up), with a zero twist and the gripper hold the stop names, stamped with the
stop's stamp, and from then on refuses every command for a frame stamped at or before it (the
gate: a late answer to a stopped frame never moves the arm). While inactive it publishes
nothing.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import PolygonStamped, PoseArray, PoseStamped, TwistStamped
from nav_msgs.msg import OccupancyGrid
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from sensor_msgs.msg import JointState
from std_msgs.msg import ColorRGBA, Header
from std_srvs.srv import Trigger
from visualization_msgs.msg import Marker, MarkerArray

from edge_loop import topics
from edge_loop.executors import MultiThreadedExecutor
from edge_loop.kernels.camera import camera_to_world
from edge_loop.kernels.grasp_types import grasp_from_rectangle
from edge_loop.kernels.occupancy import GridSpec
from edge_loop.kernels.policy import PickPolicy, PolicyInputs, PolicyOutput, PolicyParams
from edge_loop.nodes import safe_stop
from edge_loop.nodes.sampled_inputs import SampledInputs
from edge_loop.nodes.stage_base import ConfigError, Param, StageNode, run_node
from edge_loop.nodes.vision_common import extrinsics_from, stamp_ns, stamp_seconds

WARN_PERIOD_S = 1.0
_DEF = PolicyParams()
GRASP_STATES = ('open', 'closing', 'holding', 'closed_empty', 'slipping', 'lost')


def yaw_of(q: Any) -> float:
    """Yaw about world z of a geometry_msgs/Quaternion."""
    return math.atan2(2.0 * (q.w * q.z + q.x * q.y), 1.0 - 2.0 * (q.y * q.y + q.z * q.z))


def _vec(name: str, default: tuple[float, ...], what: str, **kwargs: Any) -> Param:
    return Param(name, list(default), what, length=len(default), **kwargs)


class PickControllerNode(StageNode):
    """Lifecycle stage: the pick state machine between perception and the robot."""

    PARAMS = (
        _vec('home', _DEF.home, 'Parked TCP position outside the camera view (m, world)',
             tier='user'),
        Param('home_yaw', _DEF.home_yaw, 'Parked yaw (rad)', min=-math.pi, max=math.pi),
        _vec('drop', _DEF.drop, 'TCP position over the bin where the object is released (m)',
             tier='user'),
        Param('pregrasp_height', _DEF.pregrasp_height, 'Pre-grasp above the grasp (m)',
              min=0.02, max=0.5),
        Param('transit_height', _DEF.transit_height, 'Travel height (m)', min=0.05, max=1.0),
        Param('lift_height', _DEF.lift_height, 'Lift to this TCP height (m)', min=0.05,
              max=1.0),
        Param('min_tcp_z', _DEF.min_tcp_z, 'Lowest closing height of the TCP (m)', min=0.0,
              max=0.5, tier='user'),
        Param('kp_linear', _DEF.kp_linear, 'Position gain (1/s)', min=0.1, max=50.0),
        Param('kp_yaw', _DEF.kp_yaw, 'Yaw gain (1/s)', min=0.1, max=50.0),
        Param('max_speed', _DEF.max_speed, 'TCP speed limit (m/s)', min=0.01, max=2.0),
        Param('descend_speed', _DEF.descend_speed, 'Speed limit while descending (m/s)',
              min=0.005, max=1.0),
        Param('max_yaw_rate', _DEF.max_yaw_rate, 'Yaw rate limit (rad/s)', min=0.05, max=10.0),
        Param('position_tolerance', _DEF.position_tolerance, 'Arrived within (m)', min=0.0005,
              max=0.05),
        Param('grip_force', _DEF.grip_force, 'Max grip force (N)', min=0.0, max=200.0, tier='user'),
        Param('max_opening', _DEF.max_opening, 'Gripper opening limit (m)', min=0.01, max=0.3,
              tier='user'),
        Param('opening_margin', _DEF.opening_margin, 'Added to the planned opening (m)',
              min=-0.02, max=0.05),
        Param('close_timeout_s', _DEF.close_timeout_s, 'Give up closing after (s)', min=0.1,
              max=10.0),
        Param('confirm_s', _DEF.confirm_s, 'Holding this long before lifting (s)', min=0.0,
              max=5.0),
        Param('release_s', _DEF.release_s, 'Time to let go over the drop pose (s)', min=0.0,
              max=5.0),
        Param('phase_timeout_s', _DEF.phase_timeout_s, 'Any phase longer than this fails (s)',
              min=1.0, max=120.0),
        Param('stale_s', _DEF.stale_s, 'Inputs older than this: hold still (s)', min=0.01,
              max=10.0),
        Param('settle_s', _DEF.settle_s, 'At home this long before a frame counts (s)',
              min=0.0, max=5.0),
        Param('max_attempts', _DEF.max_attempts, 'Failed attempts before giving up', min=1,
              max=100),
        Param('footprint_clearance', _DEF.footprint_clearance,
              'Added around each finger footprint in the occupancy check (m)', min=0.0,
              max=0.05),
        Param('unobserved_region_cells', _DEF.unobserved_region_cells,
              'Refuse grasps whose finger footprints cover an unknown region of at least this '
              'many grid cells (a depth blind spot; 0 = unknown counts as free)', min=0,
              max=1000000),
        Param('regrasp_deeper', _DEF.regrasp_deeper,
              'Close this much lower per earlier grip that slipped or was lost at the same '
              'spot (m)', min=0.0, max=0.05),
        Param('regrasp_radius', _DEF.regrasp_radius,
              'Grasp centres this close (x, y) are the same spot (m)', min=0.0, max=0.2),
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('pick_controller', **kwargs)
        self._policy: PickPolicy | None = None
        self._inputs = PolicyInputs()
        self._lock = threading.Lock()
        self._subs: list[Any] = []
        self._pubs: dict[str, Any] = {}
        self._active = False
        self._last_warn: dict[str, float] = {}
        self._bad = 0
        self._last_out: PolicyOutput | None = None
        self._sampled: SampledInputs | None = None
        self._reset_srv: Any = None
        # The safe-stop gate: commands for frames stamped at or before this are refused.
        # Held while publishing, so a stop and a command of the policy never interleave.
        self._publish_lock = threading.RLock()
        self._stopped_through_ns = -1
        self.stops_obeyed = 0
        self.commands_refused = 0

    # --- lifecycle -----------------------------------------------------------------------
    def configure_stage(self) -> None:
        """Policy parameters, publishers, subscriptions."""
        prm = self.params
        try:
            self._ext = extrinsics_from(prm, self)   # params or TF (extrinsics_source)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
        kwargs = {k: prm[k] for k in (
            'home_yaw', 'pregrasp_height', 'transit_height', 'lift_height', 'min_tcp_z',
            'kp_linear', 'kp_yaw', 'max_speed', 'descend_speed', 'max_yaw_rate',
            'position_tolerance', 'grip_force', 'max_opening', 'opening_margin',
            'close_timeout_s', 'confirm_s', 'release_s', 'phase_timeout_s', 'stale_s',
            'settle_s', 'max_attempts', 'footprint_clearance', 'unobserved_region_cells',
            'regrasp_deeper', 'regrasp_radius')}
        self._policy = PickPolicy(PolicyParams(home=tuple(prm['home']), drop=tuple(prm['drop']),
                                               **kwargs))
        self._world = prm['world_frame']
        self._inputs = PolicyInputs()
        self._pubs = {
            'arm': self.create_lifecycle_publisher(TwistStamped, topics.ARM_CMD, 10),
            'gripper': self.create_lifecycle_publisher(JointState, topics.GRIPPER_CMD, 10),
            'markers': self.create_lifecycle_publisher(MarkerArray, topics.MARKERS, 10),
            'diag': self.create_publisher(DiagnosticArray, topics.DIAGNOSTICS, 10),
        }
        self._alternatives: tuple[Any, list] = (None, [])   # (header stamp, grasps)
        self._objects: tuple[Any, list] = (None, [])        # (header stamp, (x, y, z, yaw))
        self._subs = [
            # before the grasp subscription: when both are ready, the executor takes the
            # alternatives first (the planner publishes them first too)
            self.create_subscription(PolygonStamped, topics.GRASP_ALTERNATIVES,
                                     self._on_alternatives, 10),
            self.create_subscription(PolygonStamped, topics.GRASP, self._on_grasp, 10),
            self.create_subscription(PoseArray, topics.OBJECTS, self._on_objects, 10),
            self.create_subscription(OccupancyGrid, topics.OCCUPANCY, self._on_occupancy, 10),
        ]
        # TCP pose and grasp state come at the gripper's 200+ Hz but are only read when a grasp
        # message steps the policy: sample their newest value then (no callback per message).
        self._sampled = SampledInputs(self)
        self._sampled.add(DiagnosticArray, topics.GRASP_STATE)
        self._sampled.add(PoseStamped, topics.TCP_POSE)
        self._reset_srv = self.create_service(Trigger, '~/reset', self._on_reset)
        # Its own group: the executor runs it while a (slow) grasp callback is in progress.
        self._subs.append(self.create_subscription(
            DiagnosticArray, topics.SAFE_STOP, self._on_safe_stop, safe_stop.qos(),
            callback_group=MutuallyExclusiveCallbackGroup()))

    def _on_reset(self, _request: Trigger.Request, response: Trigger.Response) -> Any:
        """Back to ``observe`` with no plan and no attempts (a new scene, or after gave_up)."""
        with self._lock:
            if self._policy is None:
                response.success, response.message = False, 'not configured'
                return response
            self._policy.reset()
        response.success, response.message = True, 'policy reset: observe, 0 attempts'
        self.get_logger().info(response.message)
        return response

    def activate_stage(self) -> None:
        """Start commanding (from observe)."""
        self._policy.reset()
        self._active = True

    def deactivate_stage(self) -> None:
        """Command a stop once, then go quiet (the robot holds still without commands)."""
        with self._publish_lock:
            if self._active and self._last_out is not None:
                stop = PolicyOutput((0.0, 0.0, 0.0, 0.0), self._last_out.gripper_opening,
                                    self._last_out.gripper_force, self._last_out.phase,
                                    'deactivated')
                self._publish(stop, self.get_clock().now().to_msg())
            self._active = False

    def release(self) -> None:
        """Destroy subscriptions and publishers (idempotent)."""
        self._active = False
        for sub in self._subs:
            self.destroy_subscription(sub)
        self._subs = []
        for pub in self._pubs.values():
            self.destroy_publisher(pub)
        self._pubs = {}
        if self._sampled is not None:
            self._sampled.destroy()
            self._sampled = None
        if self._reset_srv is not None:
            self.destroy_service(self._reset_srv)
            self._reset_srv = None
        self._policy = None

    # --- inputs --------------------------------------------------------------------------
    def _warn(self, what: str, reason: str, stamp: Any) -> None:
        self._bad += 1
        now = time.monotonic()
        if now - self._last_warn.get(what, -1e9) < WARN_PERIOD_S:
            return
        self._last_warn[what] = now
        self.get_logger().warning(f'{what} ignored: {reason}')
        diag = self._pubs.get('diag')
        if diag is not None:
            status = DiagnosticStatus(level=DiagnosticStatus.WARN, name='pick_controller: input',
                                      message=f'{what} ignored: {reason}',
                                      hardware_id=self.get_name(),
                                      values=[KeyValue(key='bad_inputs', value=str(self._bad))])
            diag.publish(DiagnosticArray(header=Header(stamp=stamp), status=[status]))

    def _on_objects(self, msg: PoseArray) -> None:
        objects = []
        for pose in msg.poses:
            p = pose.position
            vals = (float(p.x), float(p.y), float(p.z), yaw_of(pose.orientation))
            if not all(math.isfinite(v) for v in vals):
                self._warn('objects', 'non-finite pose', msg.header.stamp)
                return
            objects.append(vals)
        with self._lock:
            self._objects = (msg.header.stamp, objects)

    def _target_of(self, grasp: Any, stamp: Any) -> tuple[float, ...] | None:
        """The object of this frame's /edge_loop/objects under ``grasp`` (None: none known)."""
        objects_stamp, objects = self._objects
        if grasp is None or objects_stamp != stamp or not objects:
            return None
        centre = np.asarray(grasp.center, np.float64)[:2]
        return min(objects, key=lambda o: float(np.hypot(o[0] - centre[0], o[1] - centre[1])))

    def _on_tcp(self, msg: PoseStamped) -> None:
        p = msg.pose.position
        vals = (float(p.x), float(p.y), float(p.z), yaw_of(msg.pose.orientation))
        if not all(math.isfinite(v) for v in vals):
            self._warn('tcp pose', 'non-finite values', msg.header.stamp)
            return
        with self._lock:
            self._inputs.tcp = vals
            self._inputs.tcp_stamp = stamp_seconds(msg.header.stamp)

    def _on_grasp_state(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            if status.name == 'grasp_state':
                if status.message not in GRASP_STATES:
                    self._warn('grasp state', f'unknown state {status.message!r}',
                               msg.header.stamp)
                    return
                with self._lock:
                    self._inputs.grasp_state = status.message
                    self._inputs.grasp_state_stamp = stamp_seconds(msg.header.stamp)
                return

    def _on_occupancy(self, msg: OccupancyGrid) -> None:
        info = msg.info
        w, h = int(info.width), int(info.height)
        if w * h == 0 or len(msg.data) != w * h or not info.resolution > 0:
            self._warn('occupancy grid', f'{len(msg.data)} cells for {w}x{h}', msg.header.stamp)
            return
        if abs(info.origin.orientation.z) > 1e-6 or msg.header.frame_id.lstrip('/') not in (
                self._world, ''):
            self._warn('occupancy grid', 'only an axis-aligned grid in the world frame is '
                       'supported', msg.header.stamp)
            return
        grid = np.frombuffer(bytes(msg.data), dtype=np.int8).reshape(h, w).copy()
        spec = GridSpec(origin_x=float(info.origin.position.x),
                        origin_y=float(info.origin.position.y),
                        resolution=float(info.resolution), width=w, height=h)
        with self._lock:
            self._inputs.occupancy = grid
            self._inputs.occupancy_spec = spec
            self._inputs.occupancy_stamp = stamp_seconds(msg.header.stamp)

    def _sample_sensors(self) -> None:
        """Take the newest TCP pose and grasp state (if any arrived since the last step)."""
        sampled = self._sampled
        if sampled is None:
            return
        state = sampled.newest(topics.GRASP_STATE)
        if state is not None:
            self._on_grasp_state(state)
        tcp = sampled.newest(topics.TCP_POSE)
        if tcp is not None:
            self._on_tcp(tcp)

    def _grasp_from(self, msg: PolygonStamped):
        """PlanarGrasp in world from the jaw rectangle, None for 'nothing found'."""
        if len(msg.polygon.points) not in (0, 4):
            raise ValueError(f'jaw rectangle needs 4 points, got {len(msg.polygon.points)}')
        grasps = self._grasps_from(msg)
        return grasps[0] if grasps else None

    def _grasps_from(self, msg: PolygonStamped) -> list:
        """PlanarGrasps in world from jaw rectangles of 4 points each."""
        pts = msg.polygon.points
        if len(pts) % 4:
            raise ValueError(f'jaw rectangles need 4 points each, got {len(pts)}')
        if not pts:
            return []
        corners = np.array([[p.x, p.y, p.z] for p in pts], dtype=np.float64)
        if not np.all(np.isfinite(corners)):
            raise ValueError('non-finite corner')
        frame = msg.header.frame_id.lstrip('/')
        if frame not in (self._world, ''):
            if frame != 'camera_color_optical_frame':
                raise ValueError(f'unknown frame {frame!r}')
            corners = camera_to_world(corners, self._ext).astype(np.float64)
        return [grasp_from_rectangle(corners[i:i + 4]) for i in range(0, len(corners), 4)]

    def _on_alternatives(self, msg: PolygonStamped) -> None:
        try:
            grasps = self._grasps_from(msg)
        except ValueError as exc:
            self._warn('grasp_alternatives', str(exc), msg.header.stamp)
            grasps = []
        with self._lock:
            self._alternatives = (msg.header.stamp, grasps)

    def _on_grasp(self, msg: PolygonStamped) -> None:
        policy = self._policy
        if not self._active or policy is None:
            return
        now = stamp_seconds(msg.header.stamp)
        try:
            grasp = self._grasp_from(msg)
        except ValueError as exc:
            self._warn('grasp', str(exc), msg.header.stamp)
            grasp = None
        self._sample_sensors()
        with self._lock:
            self._inputs.grasp = grasp
            self._inputs.grasp_stamp = now if grasp is not None else None
            stamp, alternatives = self._alternatives
            self._inputs.grasp_alternatives = (alternatives if stamp == msg.header.stamp
                                               and grasp is not None else [])
            self._inputs.target = self._target_of(grasp, msg.header.stamp)
            out = policy.step(now, self._inputs)
        self.debug_delay()
        with self._publish_lock:
            if stamp_ns(msg.header.stamp) <= self._stopped_through_ns:
                self.commands_refused += 1
                self._warn('command', f'frame {now:.3f} was safe-stopped before its command '
                           'was ready: not sent', msg.header.stamp)
                return
            self._publish(out, msg.header.stamp)

    def _on_safe_stop(self, msg: DiagnosticArray) -> None:
        """Carry out the deadline monitor's safe stop; close the gate up to its stamp."""
        event = safe_stop.from_message(msg)
        if event is None:
            return
        with self._publish_lock:
            if event.stamp_ns <= self._stopped_through_ns:
                return   # already stopped through it (e.g. the latched history on configure)
            self._stopped_through_ns = event.stamp_ns
            if not self._active or not self._pubs:
                return
            last = self._last_out
            opening = event.hold_opening_m if event.hold_opening_m is not None else (
                last.gripper_opening if last is not None else None)
            force = event.hold_force_n if event.hold_force_n is not None else (
                last.gripper_force if last is not None else 0.0)
            self._publish_stop(msg.header.stamp, opening, force)
            self.stops_obeyed += 1
        self.get_logger().warning(
            f'safe stop ({event.reason}) for frame {event.stamp_ns / 1e9:.3f}: holding still',
            throttle_duration_sec=1.0)

    # --- outputs -------------------------------------------------------------------------
    def _publish_stop(self, stamp: Any, opening: float | None, force: float) -> None:
        """Zero twist and (if the opening is known) a gripper hold, stamped ``stamp``."""
        self._pubs['arm'].publish(TwistStamped(header=Header(stamp=stamp, frame_id=self._world)))
        if opening is not None:
            self._pubs['gripper'].publish(JointState(
                header=Header(stamp=stamp), name=['gripper'], position=[float(opening)],
                velocity=[], effort=[float(force)]))

    def _publish(self, out: PolicyOutput, stamp: Any) -> None:
        if not self._pubs:
            return
        header = Header(stamp=stamp, frame_id=self._world)
        twist = TwistStamped(header=header)
        twist.twist.linear.x, twist.twist.linear.y, twist.twist.linear.z = out.twist[:3]
        twist.twist.angular.z = out.twist[3]
        self._pubs['arm'].publish(twist)
        self._pubs['gripper'].publish(JointState(
            header=Header(stamp=stamp), name=['gripper'], position=[out.gripper_opening],
            velocity=[], effort=[out.gripper_force]))
        self._last_out = out
        marker = Marker(header=header, ns='pick_controller', id=0,
                        type=Marker.TEXT_VIEW_FACING, action=Marker.ADD,
                        text=f'{out.phase}: {out.reason}')
        tcp = self._inputs.tcp or (0.0, 0.0, 0.3, 0.0)
        marker.pose.position.x, marker.pose.position.y = float(tcp[0]), float(tcp[1])
        marker.pose.position.z = float(tcp[2]) + 0.08
        marker.pose.orientation.w = 1.0
        marker.scale.z = 0.03
        marker.color = ColorRGBA(r=1.0, g=1.0, b=1.0, a=1.0)
        self._pubs['markers'].publish(MarkerArray(markers=[marker]))


def main(args: list[str] | None = None) -> int:
    """Run the pick_controller node (two threads: policy steps and safe stops)."""
    # A safe stop must not wait long for the GIL while a policy step runs.
    sys.setswitchinterval(0.001)
    return run_node(PickControllerNode, args, executor_cls=MultiThreadedExecutor)


if __name__ == '__main__':
    main()
