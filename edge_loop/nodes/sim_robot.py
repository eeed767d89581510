# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""sim_robot: the simulated camera, gripper and scene as one lifecycle node.

While active, a simulation thread steps pybullet at 240 Hz simulated time and publishes
``/gripper/joint_states`` and ``/arm/tcp_pose`` after every step; every
``240 / camera_rate_hz`` steps it renders an RGB-D frame and publishes colour (rgb8), aligned
depth (16UC1) and camera_info plus the ground truth (``/sim/objects``, ``/sim/mask``,
``/sim/occupancy``; only computed while someone subscribes). All stamps are simulated time, so
the loop runs on ``/clock`` when rendering (~150 ms a frame here) is slower than real time.

``/clock`` goes out at ``clock_rate_hz`` (every ``240 / clock_rate_hz``-th step) and always at
a camera frame's stamp, just before the frame: while the loop computes a frame the clock reads
that frame's stamp. Every ``use_sim_time`` process handles each ``/clock`` message in its
executor, so the rate is what the whole graph pays for simulated time; nothing in the loop
needs it finer (stamps come from the messages, the stall and deadline checks are 16 ms or
more). This node keeps its own clock on simulated time without subscribing to its ``/clock``.

Commands: ``/edge_loop/cmd/arm`` (TwistStamped, TCP velocity + yaw rate; the robot holds still
when none arrived for ``watchdog_s`` of simulated time) and ``/edge_loop/cmd/gripper``
(JointState, position = [opening], effort = [max force]). With ``lockstep`` the thread waits,
after each frame, for an arm command stamped with that frame's stamp (or
``lockstep_timeout_s``) before stepping on: deterministic closed loops on a loaded machine.

A grasp is judged when the gripper closed near the table and then lifted 8 cm (or opened
again): ``/sim/grasp_outcome`` says held / closed_empty / dropped. ``~/reset_scene``
(std_srvs/Trigger) builds the scene of the next seed without restarting the process; the
published clock keeps running forward across resets.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseArray, PoseStamped, TwistStamped
from nav_msgs.msg import OccupancyGrid
from rclpy.clock_type import ClockType
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.time import Time
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Image, JointState
from std_srvs.srv import Trigger

from edge_loop import topics
from edge_loop.nodes.stage_base import ConfigError, Param, StageNode, run_node
from edge_loop.sim import messages as sim_msgs
from edge_loop.sim.lighting import CONDITION_NAMES
from edge_loop.sim.world import PHYSICS_HZ, SimFrame, SimWorld
from edge_loop.transport import FrameWriter

IMAGE_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=2,
                       reliability=ReliabilityPolicy.RELIABLE)
STATE_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=50,
                       reliability=ReliabilityPolicy.RELIABLE)
# Reliable: matches both best-effort (rclpy's TimeSource) and reliable /clock subscribers.
CLOCK_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10,
                       reliability=ReliabilityPolicy.RELIABLE)
LATCHED_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1,
                         reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
GRASP_CLOSE_BELOW_Z = 0.10      # a close command below this TCP height starts a grasp attempt
GRASP_JUDGE_LIFT = 0.08         # judged once the TCP rose this much above the closing height


def _stamp_ns(stamp: Any) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


class SimRobot(StageNode):
    """Lifecycle node around :class:`edge_loop.sim.world.SimWorld` (see module docstring)."""

    PARAMS = (
        Param('camera_rate_hz', 15.0, 'Camera frames per second of simulated time',
              min=1.0, max=60.0),
        Param('seed', 0, 'Scene seed (reset_scene moves on to seed + 1, + 2, ...)', min=0,
              max=2**31 - 1),
        Param('n_objects', 0, 'Objects in the scene (1-5); 0 = drawn from the seed',
              min=0, max=5, at_runtime='later'),   # the scene parameters: read at reset
        Param('objects', '', "Explicit objects, comma-separated ('cube', 'cylinder', '812'); "
              "'' = drawn from the seed and split", at_runtime='later'),
        Param('split', 'heldout', 'Object set: train (000-799) or heldout (800-999)',
              choices=('train', 'heldout'), at_runtime='later'),
        Param('lighting', 'nominal', 'Lighting condition, or cycle to go through all of them',
              choices=(*CONDITION_NAMES, 'cycle'), at_runtime='later'),
        Param('cycle_frames', 30, 'Frames per condition in lighting cycle mode', min=1,
              max=100000),
        Param('lockstep', False, 'After each frame wait for the arm command stamped with it'),
        Param('lockstep_timeout_s', 2.0, 'Wall-clock wait for that command', min=0.001,
              max=600.0),
        Param('watchdog_s', 0.3, 'Hold still when no arm command came for this long (sim s)',
              min=0.01, max=10.0),
        Param('max_realtime_factor', 1.0,
              'Never run faster than this times real time (0 = as fast as possible)',
              min=0.0, max=1000.0),
        Param('publish_ground_truth', True, 'Publish /sim/objects, /sim/mask, /sim/occupancy'),
        Param('shear_sensing', True,
              'Also publish the pad shear force (left_finger_shear/right_finger_shear in '
              '/gripper/joint_states); false models pads that sense normal force only'),
        Param('clock_start_s', 1.0, 'Simulated time of the first step (0 would read as unset)',
              min=0.0, max=1e9),
        Param('clock_rate_hz', 60.0,
              '/clock messages per simulated second (240 = every physics step); a camera '
              "frame's stamp is always published", min=1.0, max=PHYSICS_HZ),
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('sim_robot', **kwargs)
        self.world: SimWorld | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._cmd_cv = threading.Condition(self._lock)
        self._twist = (np.zeros(3), 0.0)
        self._twist_time_ns = -1
        self._last_cmd_stamp_ns = -1
        self._gripper_cmd: tuple[float, float] | None = None
        self._reset_seed: int | None = None
        self._reset_done = threading.Event()
        self._pubs: dict[str, Any] = {}
        self._writer: FrameWriter | None = None
        self._subs: list[Any] = []
        self._srv = None
        self._base_ns = 0
        self._steps = 0          # physics steps since the first scene (clock)
        self._frames = 0
        self._seed = 0
        self._grasp: dict[str, Any] | None = None
        self.lockstep_timeouts = 0
        self.ignored_commands = 0
        self._wall_at_frame = (0.0, 0)
        self._clock_ns = -1      # last time published on /clock
        self._own_sim_time = self._take_own_clock()

    def _take_own_clock(self) -> bool:
        """With use_sim_time, drive this node's clock directly instead of from /clock.

        rclpy's TimeSource would subscribe to the /clock this node publishes and take every
        message through the executor; the simulation thread sets the time itself instead.
        """
        if not self.get_parameter('use_sim_time').value:
            return False
        self._time_source.detach_node()   # drops its /clock subscription; clocks stay on ROS time
        return True

    # --- lifecycle ------------------------------------------------------------------------
    def configure_stage(self) -> None:
        self._seed = int(self.params['seed'])
        self._base_ns = int(self.params['clock_start_s'] * 1e9)
        self._steps = 0
        self._frames = 0
        # The clock starts over: commands stamped on the old clock must not answer the new
        # frames (lock-step would stop waiting) nor count as fresh (the arm would move on).
        with self._cmd_cv:
            self._twist = (np.zeros(3), 0.0)
            self._twist_time_ns = -1
            self._last_cmd_stamp_ns = -1
            self._gripper_cmd = None
        self._clock_ns = -1
        self._build_world(self._seed)
        pub = self.create_lifecycle_publisher
        # Camera frames go through the frame channel: written once into a shared-memory loan
        # (transport shm), or as Image topics (transport ros); camera_info on ROS either way.
        intr = self.world.intrinsics if self.world is not None else None
        size = {} if intr is None else {'max_width': intr.width, 'max_height': intr.height}
        self._writer = FrameWriter(self, transport=self.params['transport'],
                                   channel=self.params['frame_channel'], **size)
        self._pubs = {
            'joints': pub(JointState, topics.JOINT_STATES, STATE_QOS),
            'tcp': pub(PoseStamped, topics.TCP_POSE, STATE_QOS),
            'clock': pub(Clock, topics.CLOCK, CLOCK_QOS),
            'objects': pub(PoseArray, topics.SIM_OBJECTS, IMAGE_QOS),
            'mask': pub(Image, topics.SIM_MASK, IMAGE_QOS),
            'occupancy': pub(OccupancyGrid, topics.SIM_OCCUPANCY, IMAGE_QOS),
            'outcome': pub(sim_msgs.DiagnosticArray, topics.SIM_GRASP_OUTCOME, LATCHED_QOS),
            'diagnostics': pub(sim_msgs.DiagnosticArray, topics.DIAGNOSTICS, 10),
        }
        self._subs = [
            self.create_subscription(TwistStamped, topics.ARM_CMD, self._on_arm, 10),
            self.create_subscription(JointState, topics.GRIPPER_CMD, self._on_gripper, 10),
        ]
        # The reset waits for the simulation thread to rebuild the scene (~0.1 s, plus the
        # end of a render): short enough for the single-threaded executor to wait in it, so
        # this node needs no multi-threaded executor (see edge_loop.executors for rclpy's).
        self._srv = self.create_service(Trigger, '~/reset_scene', self._on_reset)

    def activate_stage(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name='sim_robot', daemon=True)
        self._thread.start()

    def deactivate_stage(self) -> None:
        self._stop_thread()

    def release(self) -> None:
        self._stop_thread()
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        for pub in self._pubs.values():
            self.destroy_publisher(pub)
        self._pubs = {}
        for sub in self._subs:
            self.destroy_subscription(sub)
        self._subs = []
        if self._srv is not None:
            self.destroy_service(self._srv)
            self._srv = None
        if self.world is not None:
            self.world.close()
            self.world = None

    def _stop_thread(self) -> None:
        self._stop.set()
        with self._cmd_cv:
            self._cmd_cv.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10.0)
        self._thread = None

    def _build_world(self, seed: int) -> None:
        lighting = self.params['lighting']
        specs = [s.strip() for s in self.params['objects'].split(',') if s.strip()] or None
        try:
            world = SimWorld(seed, n_objects=self.params['n_objects'] or None,
                             split=self.params['split'], object_specs=specs,
                             lighting='nominal' if lighting == 'cycle' else lighting,
                             camera_position=self.params['camera_position'],
                             camera_orientation=self.params['camera_orientation'])
        except ValueError as exc:
            raise ConfigError(f'scene {seed}: {exc}') from None
        if self.world is not None:
            self.world.close()
        self.world = world
        self._grasp = None
        with self._lock:
            self._twist = (np.zeros(3), 0.0)
            self._gripper_cmd = None
        self.get_logger().info(
            f'scene seed {seed}, lighting {world.light.name}: ' +
            ', '.join(o.name for o in world.objects))

    # --- commands -------------------------------------------------------------------------
    def _on_arm(self, msg: TwistStamped) -> None:
        v = np.array([msg.twist.linear.x, msg.twist.linear.y, msg.twist.linear.z])
        yaw_rate = float(msg.twist.angular.z)
        if not (np.all(np.isfinite(v)) and np.isfinite(yaw_rate)):
            self.get_logger().warning('arm command with NaN/inf ignored',
                                      throttle_duration_sec=2.0)
            self.ignored_commands += 1
            return
        with self._cmd_cv:
            self._twist = (v, yaw_rate)
            self._twist_time_ns = self._now_ns()
            self._last_cmd_stamp_ns = max(self._last_cmd_stamp_ns, _stamp_ns(msg.header.stamp))
            self._cmd_cv.notify_all()

    def _on_gripper(self, msg: JointState) -> None:
        idx = list(msg.name).index('gripper') if 'gripper' in msg.name else 0
        if len(msg.position) <= idx or not np.isfinite(msg.position[idx]):
            self.get_logger().warning('gripper command without a finite position[0] ignored',
                                      throttle_duration_sec=2.0)
            self.ignored_commands += 1
            return
        force = float(msg.effort[idx]) if len(msg.effort) > idx else float('nan')
        with self._lock:
            self._gripper_cmd = (float(msg.position[idx]), force)

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response
                  ) -> Trigger.Response:
        # The scene parameters may have been changed since configure (the demo sets the
        # lighting per episode): re-read and validate them for the new scene.
        try:
            for spec in self.PARAMS:
                if spec.name in ('lighting', 'n_objects', 'objects', 'split'):
                    self.params[spec.name] = spec.validate(self.get_parameter(spec.name).value)
        except ConfigError as exc:
            response.success, response.message = False, str(exc)
            return response
        seed = self._seed + 1
        if self._thread is None or not self._thread.is_alive():
            try:
                self._build_world(seed)
                self._seed = seed
            except ConfigError as exc:
                response.success, response.message = False, str(exc)
                return response
        else:
            self._reset_done.clear()
            with self._cmd_cv:
                self._reset_seed = seed
                self._cmd_cv.notify_all()
            if not self._reset_done.wait(30.0):
                response.success, response.message = False, 'reset timed out'
                return response
        response.success = self.world is not None and self._seed == seed
        response.message = f'seed {self._seed}: ' + ', '.join(
            o.name for o in self.world.objects) if self.world else 'no world'
        return response

    # --- simulation thread ----------------------------------------------------------------
    def _now_ns(self) -> int:
        return sim_msgs.step_ns(self._steps, self._base_ns)

    def _run(self) -> None:
        try:
            self._loop()
        except Exception as exc:  # noqa: BLE001 - report and stop rather than die silently
            if self._stop.is_set() or not self.context.ok():
                return   # shutting down: Ctrl-C invalidates the context under a publish
            self.get_logger().error(f'simulation thread failed: {type(exc).__name__}: {exc}')

    def _loop(self) -> None:
        steps_per_frame = max(1, round(PHYSICS_HZ / self.params['camera_rate_hz']))
        steps_per_clock = max(1, round(PHYSICS_HZ / self.params['clock_rate_hz']))
        rtf = self.params['max_realtime_factor']
        wall0, sim0 = time.monotonic(), self._steps
        next_frame = self._steps
        while not self._stop.is_set():
            if self._reset_seed is not None:
                seed, self._reset_seed = self._reset_seed, None
                try:
                    self._build_world(seed)
                    self._seed = seed
                except ConfigError as exc:
                    self.get_logger().error(str(exc))
                self._reset_done.set()
                next_frame = self._steps
            world = self.world
            if world is None:
                return
            if self._steps >= next_frame:
                next_frame = self._steps + steps_per_frame
                stamp_ns = self._now_ns()
                if self._clock_ns != stamp_ns:
                    self._publish_clock(stamp_ns)   # the loop computes the frame at its stamp
                self._render_and_publish(world, stamp_ns)
                if self.params['lockstep']:
                    self._wait_for_answer(stamp_ns)
            self._apply_commands(world)
            world.step()
            self._steps += 1
            if self._steps % steps_per_clock == 0:
                self._publish_clock(self._now_ns())
            self._publish_state(world)
            self._judge_grasp(world)
            if rtf > 0:
                ahead = (self._steps - sim0) / PHYSICS_HZ / rtf - (time.monotonic() - wall0)
                if ahead > 0.002:
                    self._stop.wait(ahead)

    def _wait_for_answer(self, stamp_ns: int) -> None:
        deadline = time.monotonic() + self.params['lockstep_timeout_s']
        with self._cmd_cv:
            while self._last_cmd_stamp_ns < stamp_ns and not self._stop.is_set() \
                    and self._reset_seed is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.lockstep_timeouts += 1
                    self.get_logger().warning('lockstep: no arm command for the last frame',
                                              throttle_duration_sec=5.0)
                    return
                self._cmd_cv.wait(left)

    def _apply_commands(self, world: SimWorld) -> None:
        with self._lock:
            v, yaw_rate = self._twist
            fresh = self._twist_time_ns >= 0 and \
                self._now_ns() - self._twist_time_ns <= self.params['watchdog_s'] * 1e9
            grip, self._gripper_cmd = self._gripper_cmd, None
        if fresh:
            world.gripper.command_twist(v, yaw_rate)
        else:
            world.gripper.command_twist(np.zeros(3), 0.0)
        if grip is not None:
            opening_before = world.gripper.opening()
            world.gripper.command_gripper(*grip)
            self._on_gripper_command(world, grip[0], opening_before)

    def _render_and_publish(self, world: SimWorld, stamp_ns: int) -> None:
        lighting = self.params['lighting']
        if lighting == 'cycle':
            cycle = self._frames // self.params['cycle_frames']
            world.set_lighting(CONDITION_NAMES[cycle % len(CONDITION_NAMES)])
        frame = world.render()
        self._frames += 1
        self.debug_delay()
        self._publish_frame(frame, stamp_ns)
        if self.params['publish_ground_truth']:
            self._publish_ground_truth(world, frame, stamp_ns)
        if self._frames % max(1, round(self.params['camera_rate_hz'])) == 1:
            self._publish_diagnostics(world, stamp_ns)

    def _publish_diagnostics(self, world: SimWorld, stamp_ns: int) -> None:
        """About once a simulated second: scene, lighting, real-time factor, problems."""
        wall, steps = time.monotonic(), self._steps
        last_wall, last_steps = self._wall_at_frame
        self._wall_at_frame = (wall, steps)
        rtf = (steps - last_steps) / PHYSICS_HZ / (wall - last_wall) if last_wall else 0.0
        ok = not (self.lockstep_timeouts or self.ignored_commands)
        values = {'seed': self._seed, 'lighting': world.light.name, 'frames': self._frames,
                  'objects': len(world.objects), 'realtime_factor': f'{rtf:.3f}',
                  'lockstep_timeouts': self.lockstep_timeouts,
                  'ignored_commands': self.ignored_commands}
        self._pubs['diagnostics'].publish(sim_msgs.diagnostic(
            'sim_robot', ok, 'ok' if ok else 'lockstep timeouts or ignored commands',
            stamp_ns, values))

    def _publish_frame(self, frame: SimFrame, stamp_ns: int) -> None:
        """Publish one camera frame: its pixels are written once, into the loan."""
        if self._writer is None:
            return
        info = sim_msgs.camera_info(frame.intrinsics, stamp_ns)
        with self._writer.loan(frame.color.shape, 'rgb8', frame.depth_mm.shape, '16UC1') as loan:
            loan.color[...] = frame.color
            loan.depth[...] = frame.depth_mm
            loan.publish(info.header.stamp, info.header.frame_id, info)

    def _publish_ground_truth(self, world: SimWorld, frame: SimFrame, stamp_ns: int) -> None:
        # Computed only for a subscriber: the closed-loop demo has none, and the visible
        # centroids and ray-cast occupancy cost milliseconds a frame.
        frame_world = self.params['world_frame']
        pubs = self._pubs
        if pubs['objects'].get_subscription_count():
            pubs['objects'].publish(
                sim_msgs.sim_objects(world.visible_centroids(frame), stamp_ns, frame_world))
        if pubs['mask'].get_subscription_count():
            pubs['mask'].publish(sim_msgs.image(frame.label, 'mono16', stamp_ns))
        if pubs['occupancy'].get_subscription_count():
            pubs['occupancy'].publish(
                sim_msgs.occupancy(world.gt_occupancy(), stamp_ns, frame_world))

    def _publish_clock(self, t_ns: int) -> None:
        self._clock_ns = t_ns
        self._pubs['clock'].publish(sim_msgs.clock(t_ns))
        if self._own_sim_time:
            self.get_clock().set_ros_time_override(Time(nanoseconds=t_ns,
                                                        clock_type=ClockType.ROS_TIME))

    def _publish_state(self, world: SimWorld) -> None:
        t_ns = self._now_ns()
        pos, vel, force = world.gripper.joint_state()
        xyz, yaw = world.gripper.tcp_pose()
        shears = world.gripper.measured_shear() if self.params['shear_sensing'] else None
        self._pubs['joints'].publish(sim_msgs.joint_state(pos, vel, force, t_ns, shears))
        self._pubs['tcp'].publish(
            sim_msgs.tcp_pose(xyz, yaw, t_ns, self.params['world_frame']))

    # --- grasp outcome --------------------------------------------------------------------
    def _on_gripper_command(self, world: SimWorld, target: float, opening: float) -> None:
        z = world.gripper.tcp_pose()[0][2]
        if target < opening - 0.005 and z < GRASP_CLOSE_BELOW_Z and self._grasp is None:
            self._grasp = {'z': z, 't_ns': self._now_ns()}
        elif target > opening + 0.005 and self._grasp is not None:
            self._finish_grasp(world, released=True)

    def _judge_grasp(self, world: SimWorld) -> None:
        if self._grasp is None or self._grasp.get('judged'):
            return
        if world.gripper.tcp_pose()[0][2] >= self._grasp['z'] + GRASP_JUDGE_LIFT:
            self._finish_grasp(world, released=False)

    def _finish_grasp(self, world: SimWorld, released: bool) -> None:
        from edge_loop.sim.grasp_trial import held_object

        grasp, self._grasp = self._grasp, None
        if grasp is None or grasp.get('judged'):
            return
        k = held_object(world)
        if k:
            success, reason = True, 'held'
        elif world.gripper.opening() < 0.002:
            success, reason = False, 'closed_empty'
        else:
            success, reason = False, 'released' if released else 'dropped'
        if released and not success and reason == 'released':
            return  # opened again before lifting: no attempt to judge
        values = {'object': str(k), 'seed': str(self._seed),
                  'object_name': world.object_by_k(k).name if k else '',
                  'closing_z': f'{grasp["z"]:.4f}'}
        self._pubs['outcome'].publish(
            sim_msgs.grasp_outcome(success, reason, self._now_ns(), values))
        self._grasp = {'judged': True, 'z': grasp['z']} if not released else None
        self.get_logger().info(f'grasp outcome: {reason} (object {k})')


def main(args: list[str] | None = None) -> int:
    """Run the sim_robot node."""
    return run_node(SimRobot, args)


if __name__ == '__main__':
    raise SystemExit(main())
