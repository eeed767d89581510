# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The pick policy: a pure state machine from perception and touch to arm/gripper commands.

Phases (``PHASES``)::

    observe --grasp accepted--> approach --at pre-grasp--> descend --at closing height--> close
    close --holding--> confirm --held for confirm_s--> lift --at lift height--> place
    place --over the drop pose--> release --open--> return --home--> observe
    close/confirm/lift/place --closed_empty | slipping | lost | timeout--> retreat --> observe

- ``observe``: the gripper is parked at ``home``, outside the camera view; only here is a new
  grasp accepted, and only one computed from a frame taken after the arm got home (while the
  arm is in view the perception sees the gripper, so the plan is locked until the next visit).
  The grasp must pass the safety check: the two finger footprints at the grasp (pad width x
  finger thickness, plus ``footprint_clearance``) must not cover an occupied cell of the
  occupancy grid that is not the target object's own (the occupied component under the grasp
  centre), nor, with ``unobserved_region_cells`` set, a large unknown region (a depth blind
  spot, where an object cannot have been seen). A refused grasp counts as a failed attempt.
- Motion is velocity servoing: P control on the TCP position and yaw (closest of the two
  symmetric yaws), with speed limits; moves that go down first travel at a safe height.
- ``retreat``: open, go up and home; after ``max_attempts`` failed attempts the policy stays
  in ``observe`` with reason ``gave_up``. A grip that held and then slipped or was lost
  (``confirm``, ``lift``, ``place``) is remembered: a later grasp within ``regrasp_radius`` of
  it closes ``regrasp_deeper`` lower per such failure there (down to ``min_tcp_z``), so the
  pads take more of the object instead of repeating a grip that has already let go (the
  planner, given the same frame, plans the same grasp).
- Holding still (zero twist) whenever the TCP pose or, while the gripper is closed, the grasp
  state is older than ``stale_s``; and whenever the phase needs an input that never came.

The node (``edge_loop/nodes/pick_controller.py``) feeds :meth:`PickPolicy.step` once per
camera frame; ``edge_loop/pick_episode.py`` closes the loop in the simulator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import cv2
import numpy as np

from edge_loop.kernels.grasp_types import MAX_OPENING, PlanarGrasp
from edge_loop.kernels.object_locator import large_regions
from edge_loop.kernels.occupancy import OCC_OCCUPIED, OCC_UNKNOWN, GridSpec

PHASES = ('observe', 'approach', 'descend', 'close', 'confirm', 'lift', 'place', 'release',
          'return', 'retreat')
FINGER_THICKNESS = 0.012


@dataclass(frozen=True)
class PolicyParams:
    """Poses (m, rad), gains (1/s), limits (m/s, rad/s), times (s) and forces (N)."""

    home: tuple[float, float, float] = (0.0, 0.40, 0.35)
    home_yaw: float = 0.0
    drop: tuple[float, float, float] = (0.0, -0.40, 0.20)
    pregrasp_height: float = 0.10
    transit_height: float = 0.22        # travel height for moves that go down afterwards
    lift_height: float = 0.22
    min_tcp_z: float = 0.022            # pads just above the tray floor
    kp_linear: float = 7.0
    kp_yaw: float = 6.0
    max_speed: float = 0.40
    descend_speed: float = 0.12
    max_yaw_rate: float = 2.0
    position_tolerance: float = 0.004
    yaw_tolerance: float = 0.04
    settle_s: float = 0.15              # at home this long before a frame counts as clear
    grip_force: float = 40.0
    max_opening: float = MAX_OPENING
    opening_margin: float = 0.0         # added to the planned opening
    close_timeout_s: float = 1.5
    confirm_s: float = 0.1
    release_s: float = 0.4
    stall_s: float = 0.4                # descend without progress this long -> close there
    phase_timeout_s: float = 8.0
    stale_s: float = 0.5
    max_attempts: int = 3
    footprint_clearance: float = 0.002
    # > 0: unknown cells in a 4-connected unknown region of at least this many cells under a
    # finger footprint refuse the grasp (100 = 25 cm2 at 5 mm: a depth blind spot, not the
    # thin occlusion shadow beside an object), since nobody has seen what is there. Off (0:
    # unknown counts as free) by default: on held-out glare scenes 800-819 (kernel episodes)
    # it picked 16 of 20 against 20 of 20, with 0 commands into occupied space either way.
    unobserved_region_cells: int = 0
    min_grasp_quality: float = -math.inf
    regrasp_deeper: float = 0.01        # per earlier slip/loss at the same spot (m)
    regrasp_radius: float = 0.02        # "the same spot": grasp centres this close in x, y (m)


@dataclass
class PolicyInputs:
    """Latest inputs with their stamps (s, the clock of ``now``; None = never received)."""

    grasp: PlanarGrasp | None = None
    grasp_stamp: float | None = None
    # The planner's other grasps of the same frame, best first: tried in order when the
    # footprint check refuses ``grasp`` (the planner checks collisions in 3-D on depth points,
    # the policy in 2-D on the grid, so the two can disagree about the same grasp).
    grasp_alternatives: list[PlanarGrasp] = field(default_factory=list)
    occupancy: np.ndarray | None = None          # int8 (rows, cols): -1 / 0 / 100
    occupancy_spec: GridSpec = field(default_factory=GridSpec)
    occupancy_stamp: float | None = None
    grasp_state: str | None = None
    grasp_state_stamp: float | None = None
    tcp: tuple[float, float, float, float] | None = None   # x, y, z, yaw
    tcp_stamp: float | None = None
    target: tuple[float, float, float, float] | None = None  # object x, y, z, yaw (info)


@dataclass(frozen=True)
class PolicyOutput:
    """One command: TCP twist (vx, vy, vz, yaw_rate), gripper target and the phase."""

    twist: tuple[float, float, float, float]
    gripper_opening: float
    gripper_force: float
    phase: str
    reason: str


ZERO = (0.0, 0.0, 0.0, 0.0)


def _valid(g: PlanarGrasp) -> bool:
    return bool(np.all(np.isfinite(g.center)) and math.isfinite(g.yaw) and g.opening > 0)


def wrap(a: float) -> float:
    """Angle in (-pi, pi]."""
    return math.atan2(math.sin(a), math.cos(a))


def symmetric_yaw(target: float, current: float) -> float:
    """The yaw of ``target`` or ``target + pi`` closest to ``current`` (parallel jaw)."""
    d = wrap(target - current)
    if d > math.pi / 2:
        d -= math.pi
    elif d < -math.pi / 2:
        d += math.pi
    return current + d


def finger_footprints(grasp: PlanarGrasp, clearance: float = 0.0) -> list[np.ndarray]:
    """(4, 2) xy corners of each finger's footprint at the grasp (before closing)."""
    c = grasp.center[:2]
    a = np.array([math.cos(grasp.yaw), math.sin(grasp.yaw)])
    b = np.array([-a[1], a[0]])
    half_w = grasp.finger_width / 2 + clearance
    out = []
    for sign in (-1.0, 1.0):
        inner = grasp.opening / 2 - clearance
        outer = grasp.opening / 2 + FINGER_THICKNESS + clearance
        p0 = c + sign * a * inner
        p1 = c + sign * a * outer
        out.append(np.array([p0 - b * half_w, p1 - b * half_w, p1 + b * half_w,
                             p0 + b * half_w]))
    return out


def footprint_cells(polygon: np.ndarray, spec: GridSpec) -> np.ndarray:
    """Bool (rows, cols): cells that the xy polygon touches (cv2 rasterisation)."""
    mask = np.zeros(spec.shape, dtype=np.uint8)
    # To a 4x finer pixel grid so partly covered cells count, then back to cells.
    k = 4
    pts = (polygon - [spec.origin_x, spec.origin_y]) / spec.resolution * k
    fine = np.zeros((spec.height * k, spec.width * k), dtype=np.uint8)
    cv2.fillPoly(fine, [np.round(pts * 16).astype(np.int32)], 1, lineType=cv2.LINE_8, shift=4)
    mask = fine.reshape(spec.height, k, spec.width, k).max(axis=(1, 3))
    return mask.astype(bool)


def target_cells(grasp: PlanarGrasp, grid: np.ndarray, spec: GridSpec) -> np.ndarray:
    """Bool (rows, cols): the occupied cells of the object that ``grasp`` takes.

    The 8-connected occupied component under the grasp centre, or, when the centre cell is
    free, those under the jaw line between the pads (one cell short of each pad, so that a
    neighbour's border cell does not count as the target's).
    """
    occupied = grid == OCC_OCCUPIED
    _, labels = cv2.connectedComponents(occupied.astype(np.uint8), connectivity=8)
    own = np.zeros(spec.shape, dtype=bool)
    centre = spec.cell_of(float(grasp.center[0]), float(grasp.center[1]))
    if centre is not None and occupied[centre]:
        return labels == labels[centre]
    half = max(0.0, grasp.opening / 2 - spec.resolution)
    a = np.array([math.cos(grasp.yaw), math.sin(grasp.yaw)])
    b = np.array([-a[1], a[0]]) * grasp.finger_width / 2
    c = grasp.center[:2]
    jaw = footprint_cells(np.array([c - a * half - b, c + a * half - b, c + a * half + b,
                                    c - a * half + b]), spec)
    for k in np.unique(labels[jaw & occupied]):
        own |= labels == k
    return own


def unobserved_regions(grid: np.ndarray, min_cells: int) -> np.ndarray:
    """(rows, cols) bool: unknown cells in 4-connected unknown regions of >= ``min_cells``.

    ``min_cells`` 0: none (unknown counts as free).
    """
    large = large_regions(grid == OCC_UNKNOWN, min_cells) if min_cells > 0 else None
    return np.zeros(grid.shape, dtype=bool) if large is None else large


def check_grasp_clear(grasp: PlanarGrasp, grid: np.ndarray, spec: GridSpec,
                      clearance: float = 0.0, own: np.ndarray | None = None,
                      unobserved_cells: int = 0) -> tuple[bool, str, np.ndarray]:
    """Whether the finger footprints avoid occupied cells that are not the target's.

    Returns (ok, reason, blocked cells). The target's cells are ``own`` if given, else
    :func:`target_cells` of ``grasp``. With ``unobserved_cells`` > 0 a footprint over an
    unknown region of at least that many cells (:func:`unobserved_regions`: a depth blind
    spot) is refused as well: an object there cannot have been seen.
    """
    occupied = grid == OCC_OCCUPIED
    if own is None:
        own = target_cells(grasp, grid, spec)
    unseen = unobserved_regions(grid, unobserved_cells)
    blocked = np.zeros(spec.shape, dtype=bool)
    hidden = np.zeros(spec.shape, dtype=bool)
    outside = False
    for poly in finger_footprints(grasp, clearance):
        cells = footprint_cells(poly, spec)
        xy = poly - [spec.origin_x, spec.origin_y]
        if (xy < 0).any() or (xy[:, 0] >= spec.width * spec.resolution).any() or \
                (xy[:, 1] >= spec.height * spec.resolution).any():
            outside = True
        blocked |= cells & occupied & ~own
        hidden |= cells & unseen
    if outside:
        return False, 'finger footprint leaves the mapped workspace', blocked
    if blocked.any():
        return False, f'finger footprint on {int(blocked.sum())} occupied cell(s)', blocked
    if hidden.any():
        return False, (f'finger footprint on {int(hidden.sum())} cell(s) of an unobserved '
                       'region (a depth blind spot?)'), hidden
    return True, 'clear', blocked


class PickPolicy:
    """The pick state machine; :meth:`step` is pure given its inputs and the phase memory."""

    def __init__(self, params: PolicyParams = PolicyParams()) -> None:
        self.p = params
        self.reset()

    def reset(self) -> None:
        """Back to ``observe`` with no plan and no attempts."""
        self.phase = 'observe'
        self.phase_since: float | None = None
        self.plan: PlanarGrasp | None = None
        self.attempts = 0
        self.picks = 0
        self.home_since: float | None = None
        self.last_reason = 'start'
        self.stall_ref: tuple[float, float] | None = None
        self.hold_since: float | None = None
        self.let_go_at: list[np.ndarray] = []   # grasp centres whose grip slipped or was lost

    # ----------------------------------------------------------------------------------
    def _goto(self, phase: str, now: float, reason: str) -> None:
        self.phase = phase
        self.phase_since = now
        self.last_reason = reason
        self.stall_ref = None
        self.hold_since = None

    def _fail(self, now: float, reason: str, let_go: bool = False) -> None:
        self.attempts += 1
        if let_go and self.plan is not None:
            self.let_go_at.append(self.plan.center.copy())
        self.plan = None
        self._goto('retreat', now, reason)

    def _regrasp_depth(self, center: np.ndarray) -> float:
        """How much lower to close at ``center``: ``regrasp_deeper`` per grip let go there."""
        p = self.p
        near = sum(1 for c in self.let_go_at
                   if math.hypot(c[0] - center[0], c[1] - center[1]) <= p.regrasp_radius)
        return near * p.regrasp_deeper

    def _servo(self, tcp: tuple[float, float, float, float], target: np.ndarray,
               yaw: float, max_speed: float | None = None) -> tuple[tuple, float]:
        """P-control twist towards ``target`` (xyz) and ``yaw``; returns (twist, distance)."""
        p = self.p
        err = target - np.asarray(tcp[:3])
        dist = float(np.linalg.norm(err))
        v = p.kp_linear * err
        limit = p.max_speed if max_speed is None else max_speed
        speed = float(np.linalg.norm(v))
        if speed > limit:
            v *= limit / speed
        yaw_err = wrap(yaw - tcp[3])
        w = float(np.clip(p.kp_yaw * yaw_err, -p.max_yaw_rate, p.max_yaw_rate))
        return (float(v[0]), float(v[1]), float(v[2]), w), dist

    def _travel(self, tcp, target: np.ndarray, yaw: float) -> tuple[tuple, bool]:
        """Move to ``target``: first up to the travel height when far away horizontally."""
        p = self.p
        horizontal = float(np.hypot(target[0] - tcp[0], target[1] - tcp[1]))
        safe_z = max(p.transit_height, target[2])
        if horizontal > 3 * p.position_tolerance and tcp[2] < safe_z - 0.02:
            twist, _ = self._servo(tcp, np.array([tcp[0], tcp[1], safe_z]), tcp[3])
            return twist, False
        twist, dist = self._servo(tcp, target, yaw)
        arrived = dist < p.position_tolerance and abs(wrap(yaw - tcp[3])) < p.yaw_tolerance
        return twist, arrived

    def _fresh(self, stamp: float | None, now: float) -> bool:
        return stamp is not None and now - stamp <= self.p.stale_s

    # ----------------------------------------------------------------------------------
    def step(self, now: float, inputs: PolicyInputs) -> PolicyOutput:
        """One control step at time ``now`` (the camera frame stamp, s)."""
        p = self.p
        if self.phase_since is None:
            self.phase_since = now
        open_cmd = (p.max_opening, p.grip_force)
        if self.plan is not None:
            open_cmd = (min(p.max_opening, self.plan.opening + p.opening_margin), p.grip_force)
        closed_cmd = (0.0, p.grip_force)
        gripper = open_cmd if self.phase in ('observe', 'approach', 'descend', 'release',
                                             'return', 'retreat') else closed_cmd
        if self.phase in ('observe', 'release', 'return', 'retreat'):
            gripper = (p.max_opening, p.grip_force)
        tcp = inputs.tcp
        if tcp is None or not self._fresh(inputs.tcp_stamp, now) or not all(
                math.isfinite(x) for x in tcp):
            return self._out(ZERO, gripper, 'stale tcp pose: holding still')
        needs_touch = self.phase in ('close', 'confirm', 'lift', 'place')
        touch = inputs.grasp_state if self._fresh(inputs.grasp_state_stamp, now) else None
        if needs_touch and touch is None:
            return self._out(ZERO, gripper, 'stale grasp state: holding still')
        elapsed = now - self.phase_since
        if self.phase not in ('observe',) and elapsed > p.phase_timeout_s:
            self._fail(now, f'{self.phase} timed out')
            return self._out(ZERO, (p.max_opening, p.grip_force), self.last_reason)
        handler = getattr(self, f'_phase_{self.phase}')
        twist, gripper_after = handler(now, inputs, tcp, touch)
        if gripper_after is not None:
            gripper = gripper_after
        return self._out(twist, gripper, self.last_reason)

    def _out(self, twist, gripper, reason: str) -> PolicyOutput:
        return PolicyOutput(tuple(float(x) for x in twist), float(gripper[0]), float(gripper[1]),
                            self.phase, reason)

    # --- phases ------------------------------------------------------------------------
    def _phase_observe(self, now, inputs, tcp, touch):
        p = self.p
        home = np.array(p.home)
        twist, dist = self._servo(tcp, home, p.home_yaw)
        if dist > 3 * p.position_tolerance:
            self.home_since = None
            return twist, None
        if self.home_since is None:
            self.home_since = now
        if self.attempts >= p.max_attempts:
            self.last_reason = 'gave_up'
            return ZERO, None
        clear_after = self.home_since + p.settle_s
        g = inputs.grasp
        if g is None or inputs.grasp_stamp is None or inputs.grasp_stamp < clear_after \
                or not self._fresh(inputs.grasp_stamp, now):
            self.last_reason = 'waiting for a grasp seen with the arm out of view'
            return ZERO, None
        if not _valid(g):
            self.last_reason = 'invalid grasp ignored'
            return ZERO, None
        if g.quality < p.min_grasp_quality:
            self.last_reason = 'grasp quality too low'
            return ZERO, None
        grid = inputs.occupancy
        if grid is None or inputs.occupancy_stamp is None or \
                inputs.occupancy_stamp < clear_after:
            self.last_reason = 'waiting for an occupancy grid seen with the arm out of view'
            return ZERO, None
        why = ''
        for rank, candidate in enumerate([g] + list(inputs.grasp_alternatives)):
            if rank and (not _valid(candidate) or candidate.quality < p.min_grasp_quality):
                continue
            plan = PlanarGrasp(center=candidate.center.copy(), yaw=candidate.yaw,
                               opening=min(p.max_opening, candidate.opening + p.opening_margin),
                               finger_width=candidate.finger_width, quality=candidate.quality)
            plan.center[2] = max(plan.center[2] - self._regrasp_depth(plan.center),
                                 p.min_tcp_z)
            ok, reason, _ = check_grasp_clear(plan, grid, inputs.occupancy_spec,
                                              p.footprint_clearance,
                                              unobserved_cells=p.unobserved_region_cells)
            if ok:
                break
            why = why or reason    # the best grasp's reason is the one reported
        else:
            self.attempts += 1
            self.home_since = now     # wait for a new plan from a later frame
            self.last_reason = f'grasp refused: {why}'
            return ZERO, None
        self.plan = plan
        self._goto('approach', now, 'grasp accepted' if not rank else
                   f'alternative grasp {rank} accepted (best refused: {why})')
        return ZERO, (plan.opening, p.grip_force)

    def _pregrasp(self) -> np.ndarray:
        c = self.plan.center
        return np.array([c[0], c[1], c[2] + self.p.pregrasp_height])

    def _phase_approach(self, now, inputs, tcp, touch):
        yaw = symmetric_yaw(self.plan.yaw, tcp[3])
        twist, arrived = self._travel(tcp, self._pregrasp(), yaw)
        if arrived:
            self.plan.yaw = yaw
            self._goto('descend', now, 'at pre-grasp')
        return twist, None

    def _phase_descend(self, now, inputs, tcp, touch):
        p = self.p
        target = self.plan.center
        twist, dist = self._servo(tcp, target, self.plan.yaw, p.descend_speed)
        if dist < p.position_tolerance:
            self._goto('close', now, 'at closing height')
            return ZERO, (0.0, p.grip_force)
        # Stalled (a finger on something): close where we are rather than push.
        if self.stall_ref is None or tcp[2] < self.stall_ref[1] - 0.002:
            self.stall_ref = (now, tcp[2])
        elif now - self.stall_ref[0] > p.stall_s:
            self._goto('close', now, 'descent stalled: closing here')
            return ZERO, (0.0, p.grip_force)
        return twist, None

    def _phase_close(self, now, inputs, tcp, touch):
        p = self.p
        if touch == 'holding':
            self._goto('confirm', now, 'contact on both fingers')
        elif touch == 'closed_empty':
            self._fail(now, 'closed on nothing')
            return ZERO, (p.max_opening, p.grip_force)
        elif now - self.phase_since > p.close_timeout_s:
            self._fail(now, 'no grasp after closing')
            return ZERO, (p.max_opening, p.grip_force)
        return ZERO, None

    def _phase_confirm(self, now, inputs, tcp, touch):
        p = self.p
        if touch != 'holding':
            if now - self.phase_since > p.close_timeout_s or touch in (
                    'closed_empty', 'lost', 'open'):
                self._fail(now, f'grasp not confirmed ({touch})',
                           let_go=touch in ('lost', 'slipping'))
                return ZERO, (p.max_opening, p.grip_force)
            self.hold_since = None
            return ZERO, None
        if self.hold_since is None:
            self.hold_since = now
        if now - self.hold_since >= p.confirm_s:
            self._goto('lift', now, 'holding confirmed')
        return ZERO, None

    def _phase_lift(self, now, inputs, tcp, touch):
        p = self.p
        if touch in ('closed_empty', 'lost', 'slipping', 'open'):
            self._fail(now, f'{touch} while lifting', let_go=touch in ('lost', 'slipping'))
            return ZERO, (p.max_opening, p.grip_force)
        target = np.array([tcp[0], tcp[1], max(p.lift_height, self.plan.center[2] + 0.1)])
        twist, dist = self._servo(tcp, target, tcp[3])
        if dist < 2 * p.position_tolerance:
            self._goto('place', now, 'lifted')
        return twist, None

    def _phase_place(self, now, inputs, tcp, touch):
        p = self.p
        if touch in ('closed_empty', 'lost', 'open'):
            self._fail(now, f'{touch} while carrying', let_go=touch == 'lost')
            return ZERO, (p.max_opening, p.grip_force)
        twist, arrived = self._travel(tcp, np.array(p.drop), tcp[3])
        if arrived:
            self._goto('release', now, 'over the drop pose')
            return ZERO, (p.max_opening, p.grip_force)
        return twist, None

    def _phase_release(self, now, inputs, tcp, touch):
        if now - self.phase_since >= self.p.release_s:
            self.picks += 1
            self.attempts = 0
            self.let_go_at.clear()
            self.plan = None
            self._goto('return', now, 'released')
        return ZERO, None

    def _go_home(self, now, tcp):
        p = self.p
        twist, arrived = self._travel(tcp, np.array(p.home), p.home_yaw)
        if arrived:
            self.home_since = None
            self._goto('observe', now, f'home after {self.phase}')
        return twist, None

    def _phase_return(self, now, inputs, tcp, touch):
        return self._go_home(now, tcp)

    def _phase_retreat(self, now, inputs, tcp, touch):
        # Straight up first: the fingers may be around or next to an object.
        p = self.p
        if tcp[2] < p.transit_height - 0.02 and (
                abs(tcp[0] - p.home[0]) > 0.01 or abs(tcp[1] - p.home[1]) > 0.01):
            twist, _ = self._servo(tcp, np.array([tcp[0], tcp[1], p.transit_height]), tcp[3])
            return twist, None
        return self._go_home(now, tcp)
