# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Verified op: grasp-state classification of a trace (streaming loop vs vectorised batch).

The equivalence is exact: both must give the same state at every sample. Also holds synthetic
gripper episodes with a known true state per sample (noise, bias and sensor delay included),
used by the tests and ``bench/bench_grasp_state.py`` next to the simulator's episodes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from edge_loop.kernels import grasp_state as gs
from edge_loop.verify.compare import Comparison
from edge_loop.verify.spec import Case, OpSpec

EPISODE_KINDS = ('grasp_release', 'empty', 'slip_lost', 'shake_hold', 'heavy_slip_recover',
                 'shear_only_slip')
FRICTION = 1.08        # pad-object friction coefficient of the simulator's pads


@dataclass
class Trace:
    """One gripper episode sampled at ``rate_hz``; ``truth`` is the true state per sample.

    ``shears``: the tangential force on each pad, where the episode has a shear channel.
    """

    kind: str
    t: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray
    forces: np.ndarray
    commanded_opening: np.ndarray
    truth: list[str]
    events: dict[str, float]
    shears: np.ndarray | None = None


def synthetic_episode(seed: int, kind: str, rate_hz: float = 250.0, noise_n: float = 0.15,
                      bias_n: float = 0.3, delay_s: float = 0.004) -> Trace:
    """A parallel gripper closing on an object (or nothing) and what happens next.

    Fingers move at 0.08 m/s towards the command; on contact the pad force rises with a 10 ms
    time constant to the grip force. ``grasp_release``: the gripper opens again.
    ``slip_lost``: the force collapses (6 ms) while the fingers close on. ``shake_hold``: the
    force oscillates +-15 % (no slip). ``heavy_slip_recover``: the force halves for 150 ms
    while the fingers creep inwards, then recovers. ``shear_only_slip``: the object slides for
    150 ms at the full grip force over a prismatic face (pad forces and opening unchanged), then
    sticks again: only the shear shows it. The shear on each pad is a fixed share (0.15-0.6) of
    the pad force while the object sticks and ``FRICTION`` times it while it slides. Forces and
    shears get Gaussian noise, a per-pad bias and a sensor delay; the truth and ``events`` are
    the physical (undelayed) times.
    """
    if kind not in EPISODE_KINDS:
        raise ValueError(f'unknown episode kind {kind!r}')
    rng = np.random.default_rng(seed)
    dt = 1.0 / rate_hz
    n = int(2.0 * rate_hz)
    t = 100.0 + np.arange(n) * dt
    width = 0.0 if kind == 'empty' else float(rng.uniform(0.015, 0.06))
    start_open = 0.08
    grip = float(rng.uniform(10.0, 40.0))
    t_close = 100.0 + float(rng.uniform(0.1, 0.3))
    t_loss = 100.0 + float(rng.uniform(1.2, 1.5)) if kind == 'slip_lost' else np.inf
    t_release = 101.6 if kind == 'grasp_release' else np.inf
    slides = kind in ('heavy_slip_recover', 'shear_only_slip')
    t_slip = (t_close + 1.0, t_close + 1.15) if slides else (np.inf,) * 2
    drops = kind == 'heavy_slip_recover'          # force halves and the fingers creep in
    cmd = np.where((t >= t_close) & (t < t_release), 0.0, start_open)
    opening = np.empty(n)
    force = np.zeros(n)
    sliding = np.zeros(n, dtype=bool)
    truth: list[str] = []
    events: dict[str, float] = {}
    o, f = start_open, 0.0
    creep = 0.0
    for k in range(n):
        tk = t[k]
        held = width > 0 and tk < t_loss and tk < t_release
        slipping = t_slip[0] <= tk < t_slip[1]
        if slipping and drops:
            creep += 0.015 * dt               # the object turns/slides: fingers creep in
        floor = width - creep if held else 0.0
        if cmd[k] < o:
            o = max(cmd[k], floor, o - 0.08 * dt)
        elif cmd[k] > o:
            o = min(cmd[k], o + 0.08 * dt)
        touching = held and o <= floor + 1e-9
        if touching:
            events.setdefault('contact', tk)
            target = grip * (0.5 if slipping and drops else 1.0)
            f += (target - f) * (1 - np.exp(-dt / 0.01))
        else:
            f *= np.exp(-dt / 0.006)
        mod = 1.0
        if kind == 'shake_hold' and tk > t_close + 0.6:
            mod = 1.0 + 0.15 * np.sin(2 * np.pi * 4.0 * (tk - t_close))
        opening[k] = o
        force[k] = f * mod
        sliding[k] = slipping and touching
        if tk >= t_loss:
            state = gs.LOST
            events.setdefault('loss', tk)
        elif slipping:
            state = gs.SLIPPING
            events.setdefault('slip', tk)
        elif touching:
            state = gs.HOLDING
        elif kind == 'empty' and o <= 1e-9:
            state = gs.CLOSED_EMPTY
            events.setdefault('closed', tk)
        elif cmd[k] < o:
            state = gs.CLOSING
            events.setdefault('closing', tk)
        else:
            state = gs.OPEN
            if tk >= t_release:
                events.setdefault('release', tk)
        truth.append(state)
    vel = np.gradient(opening, dt) / 2.0
    positions = np.stack([opening / 2, opening / 2], axis=1)
    velocities = np.stack([vel, vel], axis=1) + rng.normal(0, 0.001, (n, 2))
    bias = rng.uniform(-bias_n, bias_n, 2)
    lag = int(round(delay_s * rate_hz))
    delayed = np.concatenate([np.zeros(lag), force[:n - lag]]) if lag else force
    forces = np.clip(delayed[:, None] + bias[None, :] + rng.normal(0, noise_n, (n, 2)), 0, None)
    share = float(rng.uniform(0.15, 0.6))
    shear = force * np.where(sliding, FRICTION, share)
    delayed = np.concatenate([np.zeros(lag), shear[:n - lag]]) if lag else shear
    shears = np.clip(delayed[:, None] + rng.uniform(-bias_n, bias_n, 2)[None, :]
                     + rng.normal(0, noise_n, (n, 2)), 0, None)
    return Trace(kind, t, positions, velocities, forces, cmd.astype(np.float64), truth, events,
                 shears)


def episode_scores(trace: Trace, states: list[str], grace_s: float = 0.02) -> dict[str, float]:
    """Accuracy, decision latencies and false ``holding`` of one classified episode.

    Accuracy excludes the samples within ``grace_s`` after each true change; the latency of a
    change is the time until the estimator first reports the new true state; false holding is
    the share of not-holding samples reported as ``holding`` (outside the same grace windows: a
    release reported 8 ms late is latency, not a false hold).
    """
    t = trace.t
    truth = trace.truth
    changes = [k for k in range(1, len(truth)) if truth[k] != truth[k - 1]]
    graced = np.zeros(len(t), dtype=bool)
    latencies = []
    for k in changes:
        graced |= (t >= t[k]) & (t < t[k] + grace_s)
        hit = next((j for j in range(k, len(t)) if states[j] == truth[k]), None)
        latencies.append(np.inf if hit is None else t[hit] - t[k])
    ok = np.array([s == g for s, g in zip(states, truth)])
    empty = np.array([g not in (gs.HOLDING, gs.SLIPPING) for g in truth])
    false_hold = np.array([s == gs.HOLDING for s in states]) & empty & ~graced
    return {
        'accuracy': float(ok[~graced].mean()) if (~graced).any() else 1.0,
        'max_latency_s': float(max(latencies, default=0.0)),
        'latencies_s': latencies,
        'false_holding': float(false_hold.sum() / max(1, (empty & ~graced).sum())),
    }


def cases() -> Iterator[Case]:
    """Every episode kind, with and without the command, odd rates, noisy and clean."""
    for i, kind in enumerate(EPISODE_KINDS):
        tr = synthetic_episode(10 + i, kind)
        yield Case(f'{kind} 250 Hz with command', (tr.t, tr.positions, tr.velocities, tr.forces,
                                                   tr.commanded_opening))
        yield Case(f'{kind} 250 Hz without command', (tr.t, tr.positions, tr.velocities,
                                                      tr.forces, None))
        yield Case(f'{kind} 250 Hz with command and shear',
                   (tr.t, tr.positions, tr.velocities, tr.forces, tr.commanded_opening),
                   {'shears': tr.shears})
    tr = synthetic_episode(20, 'slip_lost', rate_hz=1000.0, noise_n=0.6, bias_n=0.5)
    yield Case('slip_lost 1 kHz, heavy noise, shear', (tr.t, tr.positions, tr.velocities,
                                                       tr.forces, tr.commanded_opening),
               {'shears': tr.shears})
    tr = synthetic_episode(21, 'shake_hold', rate_hz=200.0, noise_n=0.0, bias_n=0.0,
                           delay_s=0.0)
    cmd = tr.commanded_opening.copy()
    cmd[::7] = np.nan
    yield Case('shake_hold 200 Hz clean, command partly unknown',
               (tr.t, tr.positions, tr.velocities, tr.forces, cmd))
    rng = np.random.default_rng(3)
    t = np.sort(rng.uniform(0, 1, 300))
    t[100:103] = t[100]
    yield Case('random irregular samples with repeated stamps',
               (t, rng.uniform(0, 0.04, (300, 2)), rng.normal(0, 0.05, (300, 2)),
                rng.uniform(0, 3, (300, 2)), None))
    yield Case('random irregular samples, random shear',
               (t, rng.uniform(0, 0.04, (300, 2)), rng.normal(0, 0.05, (300, 2)),
                rng.uniform(0, 3, (300, 2)), None), {'shears': rng.uniform(0, 4, (300, 2))})
    yield Case('empty trace', (np.zeros(0), np.zeros((0, 2)), np.zeros((0, 2)),
                               np.zeros((0, 2)), None))
    yield from category_cases()


def _args(tr: Trace, cast: Any = None, view: Any = None) -> tuple[Any, ...]:
    arrays = [tr.t, tr.positions, tr.velocities, tr.forces, tr.commanded_opening]
    if cast is not None:
        arrays = [a.astype(cast) for a in arrays]
    if view is not None:
        arrays = [view(a) for a in arrays]
    return tuple(arrays)


def _strided(a: np.ndarray) -> np.ndarray:
    wide = np.zeros((a.shape[0], 2) + a.shape[1:], a.dtype)
    wide[:, 0] = a
    return wide[:, 0]


def _negative(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a[::-1])[::-1]


def category_cases() -> Iterator[Case]:
    """The failure categories (spec.CATEGORIES) that a trace can have.

    Single sample, a prime length (997 samples), strided and negative-stride views, NaN and
    inf forces, float32 arrays, and 10000 samples (``large``, only without --quick: the
    reference steps through them in Python, ~15 s).
    """
    tr = synthetic_episode(30, 'grasp_release')
    one = tuple(a[:1] for a in _args(tr))
    yield Case('single sample', one, category='single pixel')
    prime = synthetic_episode(31, 'slip_lost', rate_hz=498.5)
    assert len(prime.t) == 997
    yield Case('997 samples (prime length)', _args(prime), category='odd/prime size')
    yield Case('strided views (every other row of a wider buffer)', _args(tr, view=_strided),
               {'shears': _strided(tr.shears)}, category='non-contiguous/negative stride')
    yield Case('negative stride views', _args(tr, view=_negative),
               {'shears': _negative(tr.shears)}, category='non-contiguous/negative stride')
    forces = tr.forces.copy()
    forces[100:103, 0] = np.nan
    forces[200, 1] = np.inf
    yield Case('NaN and inf forces', (tr.t, tr.positions, tr.velocities, forces,
                                      tr.commanded_opening), category='NaN/inf/zero depth')
    yield Case('float32 arrays', _args(tr, cast=np.float32), category='dtype float32')
    long = synthetic_episode(32, 'shake_hold', rate_hz=5000.0)
    yield Case('10000 samples (2 s at 5 kHz)', _args(long), category='large 1920x1080',
               full_only=True)


def perf_case() -> Case:
    """A 2 s episode at 250 Hz with the shear channel."""
    tr = synthetic_episode(0, 'slip_lost')
    return Case('slip_lost 2 s at 250 Hz, shear', (tr.t, tr.positions, tr.velocities,
                                                   tr.forces, tr.commanded_opening),
                {'shears': tr.shears})


def compare(ref: np.ndarray, dep: np.ndarray, tol: dict) -> tuple[float, bool, str]:
    """Exact: the number of samples whose state differs must be 0."""
    allowed = tol.get('max_mismatched_samples', 0)
    if ref.shape != dep.shape:
        return Comparison(float('inf'), False, f'shape {ref.shape} != {dep.shape}',
                          max_abs=float('inf'), abs_tol=allowed, unit='samples')
    bad = np.flatnonzero(ref != dep)
    detail = 'identical state sequence' if not len(bad) else (
        f'{len(bad)} samples differ, first at {bad[0]}: {gs.STATES[ref[bad[0]]]} vs '
        f'{gs.STATES[dep[bad[0]]]}')
    return Comparison(float(len(bad)), len(bad) <= allowed, detail, max_abs=float(len(bad)),
                      abs_tol=allowed, max_rel=len(bad) / max(ref.size, 1), rel_tol=0.0,
                      unit='samples')


NOT_IMAGES = 'a gripper trace has no colour or depth image'
OPS = [
    OpSpec(name='grasp_state.classify_trace', reference=gs.classify_trace_reference,
           deployed=gs.classify_trace, cases=cases, compare=compare, perf_case=perf_case,
           claimed_speedup=2.0, dtypes=('float64', 'float32'), libraries=('numpy',),
           not_applicable={'saturated/black colour': NOT_IMAGES,
                           'depth extremes': NOT_IMAGES,
                           'huge 3840x2160': 'the large case is a 10000-sample trace'}),
]
