# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Tactile grasp state from finger positions, velocities and pad forces.

States: ``open``, ``closing``, ``holding``, ``closed_empty``, ``slipping``, ``lost``.

Per sample a *raw* state is classified from:

- contact: both pad forces (bias removed) above ``force_on``; it stays latched until the
  smaller force falls below ``force_off`` (hysteresis, so noise around one level cannot chatter);
- the opening (sum of the finger positions) and the closing speed (minus the sum of the finger
  velocities), and the commanded opening when known;
- history: ``slipping`` while in contact after ``slip_settle_s`` of holding, when the force
  drops by ``slip_drop_fraction`` from its peak over ``slip_window_s``, or the fingers keep
  closing faster than ``slip_velocity`` while the force is ``slip_creep_drop_fraction`` below
  the highest force of this hold (the object is sliding out between them; squeezing harder
  is not a slip), or -- when the gripper has a shear (tangential force) channel -- both pads
  load their contact at the friction limit: shear / normal force >= ``slip_shear_ratio`` on the
  left *and* the right pad means the object slides between them, which the normal force alone
  cannot show (a slide at constant grip force over a prismatic face leaves both the pad forces
  and the opening unchanged), or the fingers close faster than ``slip_fast_velocity`` with the
  force ``slip_fast_drop_fraction`` below the hold's peak or a pad's shear/normal at
  ``slip_pre_ratio`` or more (the finger positions come without the force sensor's delay);
  ``lost`` (once the hold has lasted ``lost_settle_s``: before, the object still settles
  between the closing fingers and contact flickering off is the closing, as the benchmark's
  truth has it) when most of the force is gone (below ``lost_fraction`` of the peak) while the
  fingers close on, or contact ends after holding while the command still says closed (the
  falling object may knock the fingers apart for a moment) or, without a known command, while
  the fingers close further than ``lost_closing`` past the opening they held at (a release
  opens them instead); ``lost`` lasts until the gripper is commanded open (without a known
  command: until the fingers open; a finger knocked apart by the falling object while the
  command says closed is no release), or until both pads touch
  something again with the fingers apart: the falling object caught between them, which is
  ``slipping`` (then ``holding`` once no slip cue remains), not a loss.

Both pads at the friction limit, rather than one: one pad alone reaches it while an object
resting on the table pivots about the other; a pure rotation in the grip (torsional slip)
leaves the net shear of both pads below the limit and needs a shear *field* to be seen. One pad
does count when its ratio *jumps* to ``pivot_shear_ratio`` from below ``pivot_jump_from``
within ``slip_jump_s``: the object starts to turn about the other pad. That *pivot* is slipping
until the pad's ratio falls below ``pivot_keep``, for at most ``pivot_max_s`` (a pad that stays
at the limit after that reads like one resting there, which is not a slip).

The published state follows the raw state only after the raw state has been the same for
``dwell_s`` (``slip_dwell_s`` for ``slipping`` from the normal-force cues: one- or two-sample
force spikes while the arm shakes are not slips) (debouncing). Stronger evidence waits less:
a pivot or the fingers closing faster than ``slip_fast_velocity`` need only ``dwell_s``, both
pads at the friction limit ``slip_limit_dwell_s`` (a little longer: an object resting close to
the limit crosses ``slip_shear_ratio`` on single samples of sensor noise -- the ratio's noise is
about 0.065 at a 6 N grip -- which two samples of dwell still published); a grip that starts
with both pads above ``firm_contact`` (far above the pads' noise) is ``holding`` at once; both
pads at the limit when one of them was
below ``slip_jump_from`` within ``slip_jump_s`` (the object broke loose just now; on the
benchmark's grasps a pad resting at the limit got there slowly) is published at once, and so is
a jump of *both* pads to ``slip_jump_ratio`` from below ``slip_jump_from`` within
``slip_jump_s``, even short of ``slip_shear_ratio``: both contacts leaving the inside of the
friction cone together is a break-loose (a heavy object sliding down as the lift starts), and
the first delayed sample of it often reads 0.93-0.96 on one pad while the shear still rises,
which cost one more sample before. The
simulated force sensor reports 3 physics steps late, so every sample of dwell adds to a delay
that is already there.

Two implementations with the same arithmetic:
:class:`GraspStateEstimator` (streaming, what the node runs) and :func:`classify_trace`
(features vectorised over a whole recorded trace, for replay and benchmarks); the harness
checks that they give the identical state sequence (``edge_loop/verify/ops_grasp_state.py``).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

OPEN = 'open'
CLOSING = 'closing'
HOLDING = 'holding'
CLOSED_EMPTY = 'closed_empty'
SLIPPING = 'slipping'
LOST = 'lost'
STATES = (OPEN, CLOSING, HOLDING, CLOSED_EMPTY, SLIPPING, LOST)
STATE_INDEX = {s: i for i, s in enumerate(STATES)}
_GRIPPED = (HOLDING, SLIPPING)


@dataclass(frozen=True)
class GraspStateParams:
    """Thresholds of one gripper (forces in N per finger pad, lengths in m, times in s)."""

    force_on: float = 1.0
    force_off: float = 0.5
    force_bias: tuple[float, float] = (0.0, 0.0)
    moving_velocity: float = 0.004      # closing speed that counts as closing (m/s)
    closed_opening: float = 0.003       # opening at or below which the fingers are together
    command_tolerance: float = 0.003    # commanded opening below actual by more -> closing
    dwell_s: float = 0.004              # a new state must persist this long to be published
    slip_dwell_s: float = 0.012         # slipping must persist longer (solver force spikes)
    slip_drop_fraction: float = 0.35
    slip_window_s: float = 0.06
    slip_velocity: float = 0.01
    slip_creep_drop_fraction: float = 0.1   # ... with the force this far below the hold's peak
    slip_fast_velocity: float = 0.03    # closing this fast with the force ...
    slip_fast_drop_fraction: float = 0.2    # ... this far below the hold's peak, or with ...
    slip_pre_ratio: float = 0.75        # ... a pad's shear/normal this high: slipping, dwell_s
    slip_settle_s: float = 0.08         # no slip decisions in the first part of a hold
    lost_settle_s: float = 0.095        # no loss decisions before this: contact gone earlier is
                                        # the closing (the benchmark's truth: 100 ms of true
                                        # contact, seen here ~4 ms later net of the sensor delay)
    lost_closing: float = 0.003
    lost_fraction: float = 0.25         # force below this share of its recent peak -> lost
    slip_shear_ratio: float = 0.97      # shear/normal on both pads: sliding (sim pads: mu 1.08)
    slip_jump_s: float = 0.015          # look-back of the jump tests
    slip_jump_from: float = 0.8         # both pads at the limit, one below this before: no dwell
    pivot_shear_ratio: float = 1.05     # one pad's shear/normal jumping to this ...
    pivot_jump_from: float = 0.5        # ... from below this: a pivot about the other pad ...
    pivot_keep: float = 0.95            # ... until that pad's ratio falls below this ...
    pivot_max_s: float = 0.03           # ... or at most this long after the jump
    slip_jump_ratio: float = 0.9        # both pads jumping to this from below slip_jump_from:
                                        # a break-loose, slipping without dwell
    slip_limit_dwell_s: float = 0.008   # both pads at the limit (no jump) must persist this
                                        # long (3 samples at 240 Hz): 0.004 published pads resting
                                        # near the limit on noise; 0.012 lost a slip (training)
    firm_contact: float = 3.0           # both pads above this entering a grip: holding
                                        # without dwell (0: always dwell)

    def validate(self) -> None:
        """Raise ValueError for inconsistent thresholds."""
        if not self.force_off < self.force_on:
            raise ValueError(f'force_off {self.force_off} must be below force_on {self.force_on}')
        if len(self.force_bias) != 2:
            raise ValueError('force_bias needs one value per finger')
        for name in ('moving_velocity', 'closed_opening', 'dwell_s', 'slip_dwell_s',
                     'slip_settle_s', 'lost_settle_s',
                     'slip_limit_dwell_s',
                     'slip_window_s', 'slip_velocity', 'lost_closing'):
            if not getattr(self, name) >= 0:
                raise ValueError(f'{name} must be >= 0')
        if not 0 < self.slip_drop_fraction < 1:
            raise ValueError('slip_drop_fraction must be in (0, 1)')
        if not 0 <= self.lost_fraction < 1:
            raise ValueError('lost_fraction must be in [0, 1)')
        if not self.slip_shear_ratio > 0:
            raise ValueError('slip_shear_ratio must be > 0')
        for name in ('slip_jump_s', 'slip_fast_velocity', 'pivot_max_s'):
            if not getattr(self, name) >= 0:
                raise ValueError(f'{name} must be >= 0')
        if not 0 < self.slip_fast_drop_fraction < 1:
            raise ValueError('slip_fast_drop_fraction must be in (0, 1)')
        if not (self.pivot_shear_ratio > 0 and self.slip_pre_ratio > 0):
            raise ValueError('pivot_shear_ratio and slip_pre_ratio must be > 0')
        if not self.slip_jump_ratio > self.slip_jump_from:
            raise ValueError('slip_jump_ratio must be above slip_jump_from')
        if not (self.firm_contact == 0 or self.firm_contact >= self.force_on):
            raise ValueError('firm_contact must be 0 (off) or at least force_on')


DEFAULT_PARAMS = GraspStateParams()


class _Machine:
    """The history-dependent part shared by both implementations (scalar float64 inputs)."""

    def __init__(self, params: GraspStateParams) -> None:
        self.p = params
        self.state = OPEN
        self.candidate = OPEN
        self.candidate_since = -math.inf
        self.hold_since = math.inf
        self.grip_opening = math.nan
        self.hold_peak = 0.0

    def step(self, t: float, contact: bool, fmin: float, peak: float, opening: float,
             closing_speed: float, command_delta: float, at_limit: bool, jump: bool,
             pivot_since: float, near_limit: bool) -> str:
        """One sample.

        ``command_delta`` = commanded minus actual opening (NaN = unknown); the shear features
        (all False / inf without a shear channel): ``at_limit`` both pads at
        ``slip_shear_ratio``, ``jump`` that with one of them below ``slip_jump_from`` within
        ``slip_jump_s`` before, or both pads at ``slip_jump_ratio`` with both below
        ``slip_jump_from`` within ``slip_jump_s`` before (a slip by itself), ``pivot_since``
        the time of the pivot jump in progress (inf: none; see :func:`_pivot_since`),
        ``near_limit`` a pad at ``slip_pre_ratio``.
        """
        p = self.p
        prev = self.state
        pivot = pivot_since <= t and t - pivot_since <= p.pivot_max_s
        cmd_open = command_delta > p.command_tolerance
        cmd_closed = command_delta < -p.command_tolerance
        fingers_opening = closing_speed < -p.moving_velocity
        # a hold younger than slip_settle_s (lost_settle_s for a loss) is still the closing:
        # the object settles between the pads, and contact flickering off is no loss (nor are
        # its force swings slips)
        settled = t - self.hold_since >= p.slip_settle_s
        loss_settled = t - self.hold_since >= p.lost_settle_s
        fast_closing = False
        if cmd_open:
            raw = OPEN                       # released or opening: whatever the pads feel
        elif prev == LOST and contact and opening > p.closed_opening:
            raw = SLIPPING                   # caught between the pads again: not gone (yet)
        elif prev == LOST and (cmd_closed or not fingers_opening):
            # stays lost until the gripper opens again: with the command known, until it is
            # commanded open (the first branch); the fingers pushed apart for a moment while the
            # command still says closed (the falling object knocking a finger) are no release
            raw = LOST
        elif (prev in _GRIPPED and loss_settled and fmin < p.lost_fraction * peak
              and closing_speed > p.moving_velocity):
            raw = LOST                       # most of the force gone and the fingers close on
        elif contact:
            raw = HOLDING
            # a large force drop, fingers closing in while the force is off its peak
            # (squeezing harder is not a slip), or both pads at the friction limit
            creep = self.hold_peak - fmin > p.slip_creep_drop_fraction * self.hold_peak
            # closing fast with the force well off the peak, or with a pad near the friction
            # limit (the fingers move now, the force sensor tells only 3 steps later)
            fast_closing = closing_speed > p.slip_fast_velocity and (
                near_limit or self.hold_peak - fmin > p.slip_fast_drop_fraction * self.hold_peak)
            if prev in _GRIPPED and settled and (
                    peak - fmin > p.slip_drop_fraction * peak
                    or (closing_speed > p.slip_velocity and creep)
                    or at_limit or jump or pivot or fast_closing):
                raw = SLIPPING
        elif prev in _GRIPPED and loss_settled and (cmd_closed or not fingers_opening and (
                closing_speed > p.moving_velocity
                or opening < self.grip_opening - p.lost_closing
                or opening <= p.closed_opening)):
            # contact gone after a settled grip: lost when the command still says closed (the
            # falling object may knock the fingers apart for a moment: no release), or, without
            # a known command, when the fingers close on past the held opening
            raw = LOST
        elif opening <= p.closed_opening and closing_speed <= p.moving_velocity:
            raw = CLOSED_EMPTY
        elif closing_speed > p.moving_velocity or cmd_closed:
            raw = CLOSING
        else:
            raw = OPEN
        if raw != self.candidate:
            self.candidate = raw
            self.candidate_since = t
        # the friction limit or fast creep is no solver force spike: the short dwells
        if raw == HOLDING and prev not in _GRIPPED and 0 < p.firm_contact <= fmin:
            dwell = 0.0                      # both pads pressed hard: no noise spike
        elif raw != SLIPPING:
            dwell = p.dwell_s
        elif jump:
            dwell = 0.0
        elif pivot or fast_closing:
            dwell = p.dwell_s
        elif at_limit:
            dwell = p.slip_limit_dwell_s
        else:
            dwell = p.slip_dwell_s
        if raw != prev and t - self.candidate_since >= dwell:
            self.state = raw
            if raw == HOLDING and prev not in _GRIPPED:
                # slip cues arm slip_settle_s after the dwell would have ended: a firm
                # contact is reported sooner, the grip does not settle sooner
                self.hold_since = t + p.dwell_s - dwell
            elif raw == SLIPPING and prev not in _GRIPPED:
                self.hold_since = t - max(p.slip_settle_s, p.lost_settle_s)
            elif raw not in _GRIPPED:
                self.hold_since = math.inf
        if self.state in _GRIPPED:
            self.hold_peak = max(self.hold_peak, fmin) if prev in _GRIPPED else fmin
        if self.state == HOLDING:
            self.grip_opening = opening
        elif self.state not in (*_GRIPPED, LOST):
            self.grip_opening = math.nan
        return self.state


class GraspStateEstimator:
    """Streaming grasp state: call :meth:`update` once per joint_states sample."""

    def __init__(self, params: GraspStateParams = DEFAULT_PARAMS) -> None:
        params.validate()
        self.params = params
        self.reset()

    def reset(self) -> None:
        """Back to ``open`` with no history."""
        self._machine = _Machine(self.params)
        self._contact = False
        self._window: deque[tuple[float, float]] = deque()
        self._ratios: deque[tuple[float, float, float]] = deque()   # (t, left, right)
        self._pivot_since = [math.inf, math.inf]   # see _pivot_since
        self.last_t = -math.inf

    @property
    def state(self) -> str:
        """The current (debounced) state."""
        return self._machine.state

    def update(self, t: float, positions, velocities, forces,
               commanded_opening: float | None = None, shears=None) -> str:
        """Fold in one sample (2 fingers each) and return the state.

        ``shears``: tangential force magnitude on each pad (N), or None without a shear channel.
        Raises ValueError for non-finite values or a sample older than the previous one.
        """
        p = self.params
        vals = [float(x) for x in (*positions, *velocities, *forces)]
        if len(vals) != 6 or not all(math.isfinite(x) for x in vals) or not math.isfinite(t):
            raise ValueError(f'need 2 finite positions, velocities and forces, got {vals}')
        shear = None if shears is None else [float(x) for x in shears]
        if shear is not None and (len(shear) != 2 or not all(math.isfinite(x) for x in shear)):
            raise ValueError(f'need 2 finite shear forces, got {shear}')
        if t < self.last_t:
            raise ValueError(f'sample time {t} before the previous one {self.last_t}')
        self.last_t = t
        opening = vals[0] + vals[1]
        closing_speed = -(vals[2] + vals[3])
        fmin = min(vals[4] - p.force_bias[0], vals[5] - p.force_bias[1])
        if fmin > p.force_on:
            self._contact = True
        elif fmin < p.force_off:
            self._contact = False
        window = self._window
        window.append((t, fmin))
        start = t - p.slip_window_s
        while window[0][0] <= start:
            window.popleft()
        peak = max(f for _, f in window)
        delta = math.nan if commanded_opening is None else float(commanded_opening) - opening
        if shear is None:
            ratio_l = ratio_r = math.nan
        else:
            ratio_l = shear[0] / max(vals[4] - p.force_bias[0], p.force_on)
            ratio_r = shear[1] / max(vals[5] - p.force_bias[1], p.force_on)
        ratios = self._ratios
        start = t - p.slip_jump_s
        while ratios and ratios[0][0] <= start:
            ratios.popleft()
        low_l = min((r[1] for r in ratios), default=math.nan)
        low_r = min((r[2] for r in ratios), default=math.nan)
        ratios.append((t, ratio_l, ratio_r))
        # both pads at the friction limit; and a moment ago one of them well inside it: the
        # object broke loose just now (nothing resting at the limit), so it needs no dwell;
        # likewise both pads jumping together to slip_jump_ratio from well inside the cone
        at_limit = min(ratio_l, ratio_r) >= p.slip_shear_ratio
        jump = (at_limit and min(low_l, low_r) < p.slip_jump_from) or (
            min(ratio_l, ratio_r) >= p.slip_jump_ratio and max(low_l, low_r) < p.slip_jump_from)
        # one pad jumped to the limit (the other need not): the object turns about that pad
        since = self._pivot_since
        for i, (r, low) in enumerate(((ratio_l, low_l), (ratio_r, low_r))):
            if r >= p.pivot_shear_ratio and low < p.pivot_jump_from:
                if since[i] == math.inf:
                    since[i] = t
            elif not r >= p.pivot_keep:
                since[i] = math.inf
        near = max(ratio_l, ratio_r) >= p.slip_pre_ratio
        return self._machine.step(t, self._contact, fmin, peak, opening, closing_speed, delta,
                                  at_limit, jump, min(since), near)


def classify_trace_reference(t, positions, velocities, forces, commanded_opening=None,
                             params: GraspStateParams = DEFAULT_PARAMS,
                             shears=None) -> np.ndarray:
    """State index per sample by running :class:`GraspStateEstimator` over a trace.

    ``positions``/``velocities``/``forces`` are (N, 2); ``commanded_opening`` (N,) or None
    (NaN = unknown at that sample); ``shears`` (N, 2) pad tangential forces or None.
    """
    est = GraspStateEstimator(params)
    n = len(t)
    out = np.empty(n, dtype=np.int8)
    for k in range(n):
        cmd = None if commanded_opening is None else float(commanded_opening[k])
        shear = None if shears is None else shears[k]
        out[k] = STATE_INDEX[est.update(float(t[k]), positions[k], velocities[k], forces[k],
                                        cmd, shear)]
    return out


def _hysteresis(on: np.ndarray, off: np.ndarray) -> np.ndarray:
    """Latch: True from an ``on`` sample until the next ``off`` sample (starts False)."""
    event = np.where(on, 1, np.where(off, 0, -1))
    idx = np.where(event >= 0, np.arange(len(event)), -1)
    np.maximum.accumulate(idx, out=idx)
    return np.where(idx >= 0, event[np.maximum(idx, 0)] == 1, False)


def _pivot_since(t: np.ndarray, ratio: np.ndarray, low: np.ndarray,
                 params: GraspStateParams) -> np.ndarray:
    """Per sample, when this pad's pivot jump in progress came (inf: none).

    A jump (ratio >= ``pivot_shear_ratio`` with ``low`` below ``pivot_jump_from``) starts a
    pivot unless one is in progress; a ratio below ``pivot_keep`` (no jump) ends it.
    """
    n = len(t)
    idx = np.arange(n)
    start = (ratio >= params.pivot_shear_ratio) & (low < params.pivot_jump_from)
    end = ~start & ~(ratio >= params.pivot_keep)
    last_end = np.maximum.accumulate(np.where(end, idx, -1))
    first_start = np.append(np.minimum.accumulate(np.where(start, idx, n)[::-1])[::-1], n)
    jumped = first_start[last_end + 1]
    return np.where(jumped <= idx, t[np.minimum(jumped, n - 1)], np.inf)


def classify_trace(t, positions, velocities, forces, commanded_opening=None,
                   params: GraspStateParams = DEFAULT_PARAMS, shears=None) -> np.ndarray:
    """Deployed :func:`classify_trace_reference`: features vectorised, one lean loop."""
    params.validate()
    t = np.asarray(t, dtype=np.float64)
    pos = np.asarray(positions, dtype=np.float64)
    vel = np.asarray(velocities, dtype=np.float64)
    frc = np.asarray(forces, dtype=np.float64)
    n = len(t)
    if not (pos.shape == vel.shape == frc.shape == (n, 2)):
        raise ValueError('positions, velocities and forces must be (N, 2) like t')
    if not (np.isfinite(t).all() and np.isfinite(pos).all() and np.isfinite(vel).all()
            and np.isfinite(frc).all()):
        raise ValueError('non-finite sample in the trace')
    if shears is not None:
        shr = np.asarray(shears, dtype=np.float64)
        if shr.shape != (n, 2) or not np.isfinite(shr).all():
            raise ValueError('shears must be finite and (N, 2) like t')
    if n and np.any(np.diff(t) < 0):
        raise ValueError('sample times must not decrease')
    opening = pos[:, 0] + pos[:, 1]
    closing_speed = -(vel[:, 0] + vel[:, 1])
    fmin = np.minimum(frc[:, 0] - params.force_bias[0], frc[:, 1] - params.force_bias[1])
    contact = _hysteresis(fmin > params.force_on, fmin < params.force_off)
    # Peak of fmin over (t - window, t]: windows are a few samples, so loop over the lag.
    first = np.searchsorted(t, t - params.slip_window_s, side='right')
    peak = fmin.copy()
    idx = np.arange(n)
    for lag in range(1, int((idx - first).max(initial=0)) + 1):
        sel = idx - lag >= first
        peak[sel] = np.maximum(peak[sel], fmin[idx[sel] - lag])
    if commanded_opening is None:
        delta = np.full(n, np.nan)
    else:
        delta = np.asarray(commanded_opening, dtype=np.float64) - opening
    if shears is None:
        ratio_l = ratio_r = np.full(n, np.nan)
    else:
        ratio_l = shr[:, 0] / np.maximum(frc[:, 0] - params.force_bias[0], params.force_on)
        ratio_r = shr[:, 1] / np.maximum(frc[:, 1] - params.force_bias[1], params.force_on)
    # Lowest ratio of each pad over the previous samples in (t - slip_jump_s, t), NaN if none.
    low_l, low_r = np.full(n, np.nan), np.full(n, np.nan)
    if shears is not None:
        first = np.searchsorted(t, t - params.slip_jump_s, side='right')
        for lag in range(1, int((idx - first).max(initial=0)) + 1):
            sel = idx - lag >= first
            src = idx[sel] - lag
            low_l[sel] = np.fmin(low_l[sel], ratio_l[src])
            low_r[sel] = np.fmin(low_r[sel], ratio_r[src])
    at_limit = np.minimum(ratio_l, ratio_r) >= params.slip_shear_ratio
    jump = (at_limit & (np.minimum(low_l, low_r) < params.slip_jump_from)) | (
        (np.minimum(ratio_l, ratio_r) >= params.slip_jump_ratio)
        & (np.maximum(low_l, low_r) < params.slip_jump_from))
    since = np.minimum(_pivot_since(t, ratio_l, low_l, params),
                       _pivot_since(t, ratio_r, low_r, params))
    near = np.maximum(ratio_l, ratio_r) >= params.slip_pre_ratio
    machine = _Machine(params)
    out = np.empty(n, dtype=np.int8)
    step = machine.step
    columns = [x.tolist() for x in (t, contact, fmin, peak, opening, closing_speed, delta,
                                    at_limit, jump, since, near)]
    for k, row in enumerate(zip(*columns)):
        out[k] = STATE_INDEX[step(*row)]
    return out


def state_names(indices: np.ndarray) -> list[str]:
    """State names of a :func:`classify_trace` result."""
    return [STATES[i] for i in indices]
