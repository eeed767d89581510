# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""ROS messages of the simulator's outputs (shared by ``sim_robot`` and ``edge-loop record``).

Stamps are integer nanoseconds of simulated time, so a recorded bag and a live run of the same
seed carry the same stamps.
"""

from __future__ import annotations

import numpy as np
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import Pose, PoseArray, PoseStamped
from nav_msgs.msg import OccupancyGrid
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import Header

from edge_loop.images import fill_image
from edge_loop.kernels.camera import Intrinsics, yaw_to_quat
from edge_loop.sim.gripper import FINGER_NAMES
from edge_loop.sim.world import GRID, SimFrame

OPTICAL_FRAME = 'camera_color_optical_frame'
PHYSICS_STEP_NS = 1e9 / 240.0


def step_ns(steps: int, base_ns: int = 0) -> int:
    """Integer nanoseconds of ``steps`` physics steps after ``base_ns``."""
    return int(base_ns + round(steps * PHYSICS_STEP_NS))


def stamp(t_ns: int) -> Time:
    """builtin_interfaces/Time of integer nanoseconds."""
    return Time(sec=int(t_ns // 1_000_000_000), nanosec=int(t_ns % 1_000_000_000))


def header(t_ns: int, frame_id: str) -> Header:
    """std_msgs/Header."""
    return Header(stamp=stamp(t_ns), frame_id=frame_id)


def camera_info(intr: Intrinsics, t_ns: int, frame_id: str = OPTICAL_FRAME) -> CameraInfo:
    """CameraInfo of an undistorted pinhole camera."""
    msg = CameraInfo(header=header(t_ns, frame_id), width=intr.width, height=intr.height,
                     distortion_model='plumb_bob')
    msg.d = [0.0] * 5
    msg.k = intr.k().reshape(-1).tolist()
    msg.r = np.eye(3).reshape(-1).tolist()
    msg.p = [intr.fx, 0.0, intr.cx, 0.0, 0.0, intr.fy, intr.cy, 0.0, 0.0, 0.0, 1.0, 0.0]
    return msg


def image(arr: np.ndarray, encoding: str, t_ns: int, frame_id: str = OPTICAL_FRAME) -> Image:
    """sensor_msgs/Image through the fast fill path."""
    return fill_image(Image(header=header(t_ns, frame_id)), arr, encoding)


def frame_messages(frame: SimFrame, t_ns: int) -> tuple[Image, Image, CameraInfo]:
    """(color rgb8, aligned depth 16UC1, camera_info) of one frame."""
    return (image(frame.color, 'rgb8', t_ns), image(frame.depth_mm, '16UC1', t_ns),
            camera_info(frame.intrinsics, t_ns))


def joint_state(positions: np.ndarray, velocities: np.ndarray, forces: np.ndarray,
                t_ns: int, shears: np.ndarray | None = None) -> JointState:
    """Gripper joint state: per-finger distance from the centreline, velocity, normal force.

    With ``shears``, two more entries ``left_finger_shear``/``right_finger_shear`` carry the
    pads' shear force as effort (position and velocity 0): one message, one stamp, so the
    estimator never pairs a normal force with the shear of another sample.
    """
    names, pos = list(FINGER_NAMES), [float(x) for x in positions]
    vel, effort = [float(x) for x in velocities], [float(x) for x in forces]
    if shears is not None:
        names += [f'{name}_shear' for name in FINGER_NAMES]
        pos += [0.0, 0.0]
        vel += [0.0, 0.0]
        effort += [float(x) for x in shears]
    return JointState(header=header(t_ns, ''), name=names, position=pos, velocity=vel,
                      effort=effort)


def pose(xyz: np.ndarray, yaw: float) -> Pose:
    """geometry_msgs/Pose of a position and a yaw about world z."""
    msg = Pose()
    msg.position.x, msg.position.y, msg.position.z = (float(v) for v in xyz)
    q = yaw_to_quat(yaw)
    msg.orientation.x, msg.orientation.y = float(q[0]), float(q[1])
    msg.orientation.z, msg.orientation.w = float(q[2]), float(q[3])
    return msg


def tcp_pose(xyz: np.ndarray, yaw: float, t_ns: int, world_frame: str = 'world') -> PoseStamped:
    """TCP pose (middle of the finger pads, gripper pointing down) in world."""
    return PoseStamped(header=header(t_ns, world_frame), pose=pose(xyz, yaw))


def sim_objects(centroids: list[tuple[int, np.ndarray, float]], t_ns: int,
                world_frame: str = 'world') -> PoseArray:
    """Visible-surface centroid + principal-axis yaw of each visible object, in label order."""
    msg = PoseArray(header=header(t_ns, world_frame))
    msg.poses = [pose(c, yaw) for _, c, yaw in sorted(centroids, key=lambda e: e[0])]
    return msg


def occupancy(occ: np.ndarray, t_ns: int, world_frame: str = 'world') -> OccupancyGrid:
    """OccupancyGrid (0 free / 100 occupied) of the contract's workspace grid."""
    msg = OccupancyGrid(header=header(t_ns, world_frame))
    msg.info.map_load_time = stamp(t_ns)
    msg.info.resolution = float(GRID['resolution'])
    msg.info.height, msg.info.width = int(occ.shape[0]), int(occ.shape[1])
    msg.info.origin.position.x, msg.info.origin.position.y = (float(v) for v in GRID['origin'])
    msg.info.origin.orientation.w = 1.0
    data = np.where(occ, 100, 0).astype(np.int8).reshape(-1)
    msg.data.frombytes(data.tobytes())  # array('b'): the fast path, not element by element
    return msg


def diagnostic(name: str, ok: bool, message: str, t_ns: int, values: dict[str, object]
               ) -> DiagnosticArray:
    """DiagnosticArray with one status ``name`` (OK or WARN) and string key/values."""
    status = DiagnosticStatus(level=DiagnosticStatus.OK if ok else DiagnosticStatus.WARN,
                              name=name, message=message, hardware_id='sim_robot')
    status.values = [KeyValue(key=k, value=str(v)) for k, v in values.items()]
    return DiagnosticArray(header=header(t_ns, 'world'), status=[status])


def grasp_outcome(success: bool, reason: str, t_ns: int, values: dict[str, str]
                  ) -> DiagnosticArray:
    """DiagnosticArray with one status 'grasp_outcome' (OK = held, WARN = failed)."""
    return diagnostic('grasp_outcome', success, reason, t_ns,
                      {'success': str(bool(success)).lower(), **values})


def clock(t_ns: int) -> Clock:
    """rosgraph_msgs/Clock."""
    return Clock(clock=stamp(t_ns))
