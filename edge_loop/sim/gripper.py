# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""A floating parallel-jaw gripper with per-finger force sensing.

Built with ``createMultiBody``: a palm and two prismatic fingers whose inner faces are the
pads (lateral friction 1.2). Gripper frame: z up (the fingers hang down along -z), x is the
closing direction; the gripper only turns about world z (top-down picks), so its yaw is the
closing direction's angle. The base follows a commanded TCP twist through a fixed constraint
whose pivot is integrated from the twist (speed clipped to 0.5 m/s); the target never runs
more than 2 cm ahead of the real gripper, so pressing on an obstacle does not wind up.

Each finger is position-controlled towards half the commanded opening with the commanded
force as its motor force limit. A gear constraint keeps the fingers symmetric about the
centreline, like a real parallel gripper's mechanism (without it the finger pair floats
sideways under a shake and drops objects); its force is capped at ``GEAR_FORCE_N`` so the
coupling can add at most that much to one finger's grip: the per-finger forces reported are
the real contact forces, not the motor limit.

Finger force sensor model (documented in ``ForceSensor``): the true normal force is the sum of
the solver's contact normal forces on that finger; the reported value is that force delayed by
3 physics steps (12.5 ms), plus a per-finger bias drawn once per world (sigma 0.15 N), plus
white noise of sigma 0.08 N + 3 % of the force, clipped at 0 N. Each pad also measures its
shear (the magnitude of the summed friction force of its contacts, as a 3-axis fingertip
sensor does) through the same model, with its own bias and noise: at constant grip force a
slide over a flat face moves neither the normal force nor the fingers, only the shear tells.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
import pybullet as p

MAX_OPENING = 0.085
MAX_SPEED = 0.5            # m/s, TCP linear speed clip
MAX_YAW_RATE = 3.0         # rad/s
MAX_FORCE = 80.0           # N, finger motor force limit clip
FINGER_SPEED = 0.12        # m/s per finger
PAD_FRICTION = 1.2
PALM_HALF = (0.055, 0.025, 0.02)
FINGER_HALF = (0.006, 0.01, 0.03)      # thickness (x), pad width (y), length (z)
PALM_TO_FINGER_Z = -PALM_HALF[2]
FINGERTIP_Z = PALM_TO_FINGER_Z - 2 * FINGER_HALF[2]   # in the gripper frame
PAD_HALF_LENGTH = 0.015
TCP_OFFSET_Z = FINGERTIP_Z + PAD_HALF_LENGTH           # TCP = middle of the pads
HOME_TCP = (0.0, 0.40, 0.35)
HOLD_FORCE_N = 400.0        # constraint force that carries the gripper
GEAR_FORCE_N = 20.0         # finger symmetry coupling force cap
LEAD_LIMIT_M = 0.02
FINGER_NAMES = ('left_finger', 'right_finger')


@dataclass(frozen=True)
class HandGeometry:
    """A parallel-jaw hand: finger size, pad friction and opening (defaults: the shipped hand).

    ``finger_half`` is (thickness along the closing direction, pad width, finger length) / 2;
    ``pad_half_length`` is the TCP (middle of the pads) to fingertip distance.
    """

    name: str = 'hand_a'
    max_opening: float = MAX_OPENING
    finger_half: tuple[float, float, float] = FINGER_HALF
    pad_friction: float = PAD_FRICTION
    pad_half_length: float = PAD_HALF_LENGTH

    @property
    def fingertip_z(self) -> float:
        """Fingertip height in the gripper frame (below the palm)."""
        return PALM_TO_FINGER_Z - 2 * self.finger_half[2]

    @property
    def tcp_offset_z(self) -> float:
        """TCP height in the gripper frame (middle of the pads)."""
        return self.fingertip_z + self.pad_half_length

    @property
    def finger_width(self) -> float:
        """Pad width across the closing direction (the planner's ``finger_width``)."""
        return 2 * self.finger_half[1]


HAND_A = HandGeometry()
# The second hand: longer, wider, thinner fingers that open further, with less grippy pads
# (a 2F-140-like jaw with hard pads against the shipped 2F-85-like one with rubber pads).
HAND_B = HandGeometry(name='hand_b', max_opening=0.11, finger_half=(0.004, 0.015, 0.0225),
                      pad_friction=0.8, pad_half_length=0.012)
HANDS = {h.name: h for h in (HAND_A, HAND_B)}


@dataclass
class ForceSensor:
    """Noise, bias and delay of the finger force sensors."""

    delay_steps: int = 3
    bias_sigma: float = 0.15
    noise_sigma: float = 0.08
    noise_rel: float = 0.03


def yaw_quat(yaw: float) -> list[float]:
    """[qx, qy, qz, qw] of a rotation by ``yaw`` about z."""
    return [0.0, 0.0, float(np.sin(yaw / 2)), float(np.cos(yaw / 2))]


class Gripper:
    """The floating gripper in one pybullet client."""

    def __init__(self, client: int, rng: np.random.Generator, dt: float,
                 home: tuple[float, float, float] = HOME_TCP, yaw: float = 0.0,
                 sensor: ForceSensor | None = None, hand: HandGeometry = HAND_A) -> None:
        self.client = client
        self.hand = hand
        self.dt = dt
        self.sensor = sensor or ForceSensor()
        self._rng = rng
        self.bias = rng.normal(0.0, self.sensor.bias_sigma, 2)
        c = client
        palm_col = p.createCollisionShape(p.GEOM_BOX, halfExtents=PALM_HALF, physicsClientId=c)
        palm_vis = p.createVisualShape(p.GEOM_BOX, halfExtents=PALM_HALF,
                                       rgbaColor=[0.25, 0.25, 0.28, 1], physicsClientId=c)
        cols, viss = [], []
        finger_half = hand.finger_half
        for sign in (-1.0, 1.0):
            offset = [sign * finger_half[0], 0.0, -finger_half[2]]
            cols.append(p.createCollisionShape(p.GEOM_BOX, halfExtents=finger_half,
                                               collisionFramePosition=offset,
                                               physicsClientId=c))
            viss.append(p.createVisualShape(p.GEOM_BOX, halfExtents=finger_half,
                                            visualFramePosition=offset,
                                            rgbaColor=[0.15, 0.15, 0.15, 1], physicsClientId=c))
        base = np.array(home) - np.array([0.0, 0.0, hand.tcp_offset_z])
        self.body = p.createMultiBody(
            baseMass=0.6, baseCollisionShapeIndex=palm_col, baseVisualShapeIndex=palm_vis,
            basePosition=base.tolist(), baseOrientation=yaw_quat(yaw),
            linkMasses=[0.05, 0.05], linkCollisionShapeIndices=cols,
            linkVisualShapeIndices=viss,
            linkPositions=[[0, 0, PALM_TO_FINGER_Z]] * 2,
            linkOrientations=[[0, 0, 0, 1]] * 2,
            linkInertialFramePositions=[[-finger_half[0], 0, -finger_half[2]],
                                        [finger_half[0], 0, -finger_half[2]]],
            linkInertialFrameOrientations=[[0, 0, 0, 1]] * 2,
            linkParentIndices=[0, 0], linkJointTypes=[p.JOINT_PRISMATIC] * 2,
            # left finger opens towards -x, right towards +x: q = pad distance from centreline
            linkJointAxis=[[-1, 0, 0], [1, 0, 0]], physicsClientId=c)
        for link in (0, 1):
            p.changeDynamics(self.body, link, lateralFriction=hand.pad_friction,
                             spinningFriction=0.005, jointLowerLimit=0.0,
                             jointUpperLimit=hand.max_opening / 2, physicsClientId=c)
            p.resetJointState(self.body, link, hand.max_opening / 2, physicsClientId=c)
        p.setCollisionFilterPair(self.body, self.body, 0, 1, 0, physicsClientId=c)
        self.gear = p.createConstraint(self.body, 0, self.body, 1, p.JOINT_GEAR, [1, 0, 0],
                                       [0, 0, 0], [0, 0, 0], physicsClientId=c)
        p.changeConstraint(self.gear, gearRatio=-1, erp=0.1, maxForce=GEAR_FORCE_N,
                           physicsClientId=c)
        self.constraint = p.createConstraint(
            self.body, -1, -1, -1, p.JOINT_FIXED, [0, 0, 0], [0, 0, 0], base.tolist(),
            childFrameOrientation=yaw_quat(yaw), physicsClientId=c)
        self._target = base.astype(np.float64)
        self._target_yaw = float(yaw)
        self._v = np.zeros(3)
        self._yaw_rate = 0.0
        self._opening = hand.max_opening
        self._force_limit = 40.0
        self._history: deque[np.ndarray] = deque(
            [np.zeros(2)] * (self.sensor.delay_steps + 1), maxlen=self.sensor.delay_steps + 1)
        self._measured = np.zeros(2)
        # The shear channel draws from its own stream (seeded from this world's bias), so
        # that adding it left every other random draw of the world as it was.
        self._shear_rng = np.random.default_rng(self.bias.view(np.uint64))
        self.shear_bias = self._shear_rng.normal(0.0, self.sensor.bias_sigma, 2)
        self._shear_history: deque[np.ndarray] = deque(
            [np.zeros(2)] * (self.sensor.delay_steps + 1), maxlen=self.sensor.delay_steps + 1)
        self._measured_shear = np.zeros(2)
        self.true_normal_shear = (np.zeros(2), np.zeros(2))   # of the last step, noiseless
        self._apply()

    # --- commands -------------------------------------------------------------------------
    def command_twist(self, v_xyz: np.ndarray | list[float], yaw_rate: float) -> None:
        """TCP linear velocity (m/s, world) and yaw rate (rad/s); clipped to the limits."""
        v = np.asarray(v_xyz, dtype=np.float64).reshape(3)
        if not np.all(np.isfinite(v)) or not np.isfinite(yaw_rate):
            v, yaw_rate = np.zeros(3), 0.0
        speed = float(np.linalg.norm(v))
        if speed > MAX_SPEED:
            v = v * (MAX_SPEED / speed)
        self._v = v
        self._yaw_rate = float(np.clip(yaw_rate, -MAX_YAW_RATE, MAX_YAW_RATE))

    def command_gripper(self, opening: float, max_force: float) -> None:
        """Target opening (m, clipped to [0, max_opening]) with a finger force limit (N)."""
        if np.isfinite(opening):
            self._opening = float(np.clip(opening, 0.0, self.hand.max_opening))
        if np.isfinite(max_force):
            self._force_limit = float(np.clip(max_force, 0.0, MAX_FORCE))
        self._apply_fingers()

    def teleport(self, tcp_xyz: np.ndarray | list[float], yaw: float) -> None:
        """Put the TCP at a pose at once (only where nothing is in the way) and stop."""
        base = np.asarray(tcp_xyz, dtype=np.float64) - np.array([0.0, 0.0,
                                                                 self.hand.tcp_offset_z])
        p.resetBasePositionAndOrientation(self.body, base.tolist(), yaw_quat(yaw),
                                          physicsClientId=self.client)
        p.resetBaseVelocity(self.body, [0, 0, 0], [0, 0, 0], physicsClientId=self.client)
        self._target, self._target_yaw = base, float(yaw)
        self._v, self._yaw_rate = np.zeros(3), 0.0
        self._apply()

    def set_opening_now(self, opening: float) -> None:
        """Put the fingers at ``opening`` at once (scene set-up only)."""
        self._opening = float(np.clip(opening, 0.0, self.hand.max_opening))
        for link in (0, 1):
            p.resetJointState(self.body, link, self._opening / 2, physicsClientId=self.client)
        self._apply_fingers()

    # --- physics --------------------------------------------------------------------------
    def before_step(self) -> None:
        """Integrate the commanded twist into the constraint target."""
        base, yaw = self._base_pose()
        self._target = self._target + self._v * self.dt
        lead = self._target - base
        dist = float(np.linalg.norm(lead))
        if dist > LEAD_LIMIT_M:
            self._target = base + lead * (LEAD_LIMIT_M / dist)
        # the TCP not below the table
        self._target[2] = max(self._target[2], -self.hand.tcp_offset_z - 0.005)
        self._target_yaw += self._yaw_rate * self.dt
        dyaw = np.arctan2(np.sin(self._target_yaw - yaw), np.cos(self._target_yaw - yaw))
        if abs(dyaw) > 0.3:
            self._target_yaw = yaw + np.sign(dyaw) * 0.3
        self._apply()

    def after_step(self) -> None:
        """Sample the finger force sensors (normal and shear)."""
        self.true_normal_shear = self.true_pad_forces()
        normal, shear = self.true_normal_shear
        self._measured = self._sense(self._history, normal, self.bias, self._rng)
        self._measured_shear = self._sense(self._shear_history, shear, self.shear_bias,
                                           self._shear_rng)

    def _sense(self, history: deque[np.ndarray], true: np.ndarray, bias: np.ndarray,
               rng: np.random.Generator) -> np.ndarray:
        """One sensor reading: ``true`` delayed, biased, noisy, clipped at 0 N."""
        history.append(true)
        delayed = history[0]
        s = self.sensor
        noise = rng.normal(0.0, 1.0, 2) * (s.noise_sigma + s.noise_rel * delayed)
        return np.maximum(delayed + bias + noise, 0.0)

    def _apply(self) -> None:
        p.changeConstraint(self.constraint, jointChildPivot=self._target.tolist(),
                           jointChildFrameOrientation=yaw_quat(self._target_yaw),
                           maxForce=HOLD_FORCE_N, physicsClientId=self.client)

    def _apply_fingers(self) -> None:
        for link in (0, 1):
            p.setJointMotorControl2(self.body, link, p.POSITION_CONTROL,
                                    targetPosition=self._opening / 2, force=self._force_limit,
                                    maxVelocity=FINGER_SPEED, positionGain=0.3,
                                    physicsClientId=self.client)

    # --- state ----------------------------------------------------------------------------
    def _base_pose(self) -> tuple[np.ndarray, float]:
        pos, orn = p.getBasePositionAndOrientation(self.body, physicsClientId=self.client)
        yaw = p.getEulerFromQuaternion(orn)[2]
        return np.array(pos), float(yaw)

    def tcp_pose(self) -> tuple[np.ndarray, float]:
        """(TCP position (3,) in world, yaw) — TCP = middle of the finger pads."""
        base, yaw = self._base_pose()
        return base + np.array([0.0, 0.0, self.hand.tcp_offset_z]), yaw

    def tcp_velocity(self) -> tuple[np.ndarray, float]:
        """(TCP linear velocity (3,), yaw rate) in world."""
        lin, ang = p.getBaseVelocity(self.body, physicsClientId=self.client)
        return np.array(lin), float(ang[2])

    def true_pad_forces(self) -> tuple[np.ndarray, np.ndarray]:
        """Noiseless (normal, shear) force on each finger (N), over its contact points.

        Normal: the sum of the contact normal forces. Shear: the magnitude of the summed
        friction vectors (both lateral friction directions of every contact).
        """
        normal, shear = np.zeros(2), np.zeros(2)
        for link in (0, 1):
            friction = np.zeros(3)
            for cp in p.getContactPoints(bodyA=self.body, linkIndexA=link,
                                         physicsClientId=self.client):
                normal[link] += max(cp[9], 0.0)
                friction += cp[10] * np.asarray(cp[11]) + cp[12] * np.asarray(cp[13])
            shear[link] = float(np.linalg.norm(friction))
        return normal, shear

    def true_pad_wrench(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Noiseless (normal, shear, shear field, torsion) of each pad, over its contacts.

        A diagnostic (7x the cost of :meth:`true_pad_forces`, so not sampled every step). On
        the benchmark's grasps a pad often touches the object at a single point (field = shear,
        torsion 0) and neither told the object turning in the grip from holding it, so neither
        is published as a sensor channel.

        normal (N): sum of the contact normal forces; shear (N): magnitude of the summed
        friction vectors; shear field (N): sum of the friction magnitudes of the contacts, what
        a pad with 3-axis taxels adds up (equal to the shear while all contacts pull one way,
        larger when they pull in different directions, as when the object turns on the pad);
        torsion (N m): magnitude of the friction moment about the pad normal through the
        centre of pressure (a 6-axis fingertip sensor's moment about its normal).
        """
        normal, shear, field, torsion = (np.zeros(2) for _ in range(4))
        _, yaw = self._base_pose()
        closing = np.array([np.cos(yaw), np.sin(yaw), 0.0])
        for link in (0, 1):
            contacts = p.getContactPoints(bodyA=self.body, linkIndexA=link,
                                          physicsClientId=self.client)
            if not contacts:
                continue
            n = np.array([max(cp[9], 0.0) for cp in contacts])
            where = np.array([cp[5] for cp in contacts])
            forces = np.array([cp[10] * np.asarray(cp[11]) + cp[12] * np.asarray(cp[13])
                               for cp in contacts])
            normal[link] = n.sum()
            shear[link] = float(np.linalg.norm(forces.sum(axis=0)))
            field[link] = float(np.linalg.norm(forces, axis=1).sum())
            centre = (n @ where) / n.sum() if n.sum() > 0 else where.mean(axis=0)
            torsion[link] = abs(float(np.cross(where - centre, forces).sum(axis=0) @ closing))
        return normal, shear, field, torsion

    def true_forces(self) -> np.ndarray:
        """Noiseless normal force on each finger (N): sum over its contact points."""
        return self.true_pad_forces()[0]

    def joint_state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(positions (2,), velocities (2,), measured forces (2,)) of left and right finger."""
        states = p.getJointStates(self.body, [0, 1], physicsClientId=self.client)
        pos = np.array([s[0] for s in states])
        vel = np.array([s[1] for s in states])
        return pos, vel, self._measured.copy()

    def measured_shear(self) -> np.ndarray:
        """Measured shear force (2,) on the left and right pad (N), same sensor model."""
        return self._measured_shear.copy()

    def opening(self) -> float:
        """Current distance between the pads (m)."""
        pos, _, _ = self.joint_state()
        return float(pos.sum())

    def contacts_with(self, body: int) -> int:
        """Number of finger links touching ``body`` (0, 1 or 2)."""
        return sum(1 for link in (0, 1) if p.getContactPoints(
            bodyA=self.body, bodyB=body, linkIndexA=link, physicsClientId=self.client))
