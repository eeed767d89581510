# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""A learned per-PAIR merge veto for the locator (experiment; training worlds only).

For each pair of grown regions that ``merging.merge_regions`` considers (they share at least
``merge_min_contact`` 4-neighbour pixel pairs), cheap pair features from what the locator has
(no labels): shared border length against sqrt of each region's size, the sizes, the border's
height steps / unknown heights / depth holes / clipped-white pixels, the share of border pixels
each per-pixel cut (colour, hue, depth step, crease) marked, the regions' mean chromaticity,
linear chromaticity and specular-free hue differences, the colour and height differences of
the two sides right at the border, mean / top height differences, brightness ratios, the
enclosure ratio. A logistic regression (numpy, standardised features) or a tiny MLP (torch,
evaluated in numpy) predicts "two objects"; a pair whose probability exceeds the threshold
loses its contact (and gap candidacy) before ``merge_regions`` runs, as
``eval_boundary.py``'s veto does (``deployed._merge_grown`` / ``merging.merge_regions`` and
the cut functions are wrapped in this process only; the package is not changed).

Labels (fitting only): a pair is "two objects" when the two regions' majority instance labels
differ and both are objects (label > 0), else "one object".

Seeds: fit on 500000-500399 (as drawn, and relit glare:1.0 where cached / every third seed),
choose the threshold on 500400-500499 (as drawn + glare), report on 500500-500799 (as drawn and
glare; never used for fitting or choosing). Seeds >= 600000 are refused.

Run (one thread; results under /tmp/pair_veto/):

    .venv-jazzy/bin/python tools/boundary/pair_veto.py collect   # -> /tmp/pair_veto/pairs_*.npz
    .venv-jazzy/bin/python tools/boundary/pair_veto.py fit       # -> /tmp/pair_veto/model.npz
    .venv-jazzy/bin/python tools/boundary/pair_veto.py choose    # thresholds on 500400-500499
    .venv-jazzy/bin/python tools/boundary/pair_veto.py evaluate [--relight glare:1.0] \
        [--threshold T] [--extra /tmp/pair_veto/model_lr.npz 0.7]
    .venv-jazzy/bin/python tools/boundary/pair_veto.py pairstats  # pair AUC on 500500-500799

As run (2026-12-07): ``fit`` (saves the MLP, the better val AUC; copied to model_mlp.npz),
``choose``; ``fit --model lr`` (model_lr.npz), ``choose``; the MLP at 0.8 scored best on the
choosing worlds (detected - false 579 against the logistic regression's 576 at 0.7), so
model.npz / threshold.json are the MLP's for ``evaluate`` (the LR row via ``--extra``).

``--features sums`` (files with the suffix ``_sums``): only what ``merging.merge_regions``
receives (:func:`sums_features`, 12 features: no pixels, no border statistics), so the veto
could live inside merge_regions and be shared by both implementations; ``collect`` then stores
both feature sets (X, Xs), ``fit`` keeps both kinds (model_sums_lr.npz / model_sums_mlp.npz),
``choose --model KIND`` writes threshold_sums_KIND.json; ``evaluate --extra`` is repeatable:

    .venv-jazzy/bin/python tools/boundary/pair_veto.py collect --features sums
    .venv-jazzy/bin/python tools/boundary/pair_veto.py fit --features sums
    .venv-jazzy/bin/python tools/boundary/pair_veto.py choose --features sums --model mlp
    .venv-jazzy/bin/python tools/boundary/pair_veto.py choose --features sums --model lr
    .venv-jazzy/bin/python tools/boundary/pair_veto.py evaluate --features sums \
        [--relight glare:1.0] --extra /tmp/pair_veto/model_sums_lr.npz T \
        --extra /tmp/pair_veto/model_mlp.npz 0.8

``evaluate`` prints a markdown table (variants ``base`` = shipped, ``pair>T`` = learned veto,
``pair oracle`` = veto exactly the pairs whose labels differ, ``bnd oracle 0.5`` = veto where
half the border lies on the true boundary, as eval_boundary.py's ceiling without its extra
cut) in eval_boundary.py's metrics, and the ``classify_misses`` classes.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import textwrap
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import boundary_common as bc  # noqa: E402
from clutter_eval import merged_count  # noqa: E402
from locator_worlds import classify_misses  # noqa: E402

from edge_loop.kernels.object_locator import deployed, locate_objects, merging  # noqa: E402
from edge_loop.kernels.object_locator.colour import linear_light  # noqa: E402
from edge_loop.sim.scoring import match_detections  # noqa: E402

OUT = Path('/tmp/pair_veto')
GLARE = 'glare:1.0'
FEATURES = [
    'log_contact', 'contact_sqrt_small', 'contact_sqrt_large', 'log_small', 'log_large',
    'step_frac', 'nan_frac', 'hole_frac', 'clip_frac', 'colour_cut_frac', 'hue_cut_frac',
    'depth_cut_frac', 'crease_cut_frac', 'chroma_l1', 'linear_chroma_l1', 'hue_l1',
    'hue_known', 'side_chroma_l1', 'border_abs_dh_mm', 'side_dh_mm', 'mean_dh_mm', 'top_dh_mm',
    'log_bright_ratio', 'side_log_bright_ratio', 'enclosed', 'max_top_mm',
]
# ``--features sums``: only what ``merging.merge_regions`` receives (per region rgb_sums,
# linear_sums, counts, hue sums / counts, perimeter; per pair contact, smooth), so the veto
# could live inside merge_regions, shared by both implementations. See sums_features.
SUMS_FEATURES = [
    'log_contact', 'contact_sqrt_small', 'contact_sqrt_large', 'log_small', 'log_large',
    'nonsmooth_frac', 'chroma_l1', 'linear_chroma_l1', 'hue_l1', 'hue_known',
    'log_bright_ratio', 'enclosed',
]
# ``--features sums+clip``: also the clipped shares derivable from the sums: per region
# 1 - hue count / count (pixels with a channel at merge_clip_level or over; 0 without hue or
# when blurred), the larger and smaller of the pair's.
CLIP_FEATURES = ['clip_share_max', 'clip_share_min']
# The same from the 26 columns (nonsmooth_frac = step_frac + nan_frac); a check only: the
# hue differs where the frame is blurred (merge_regions ignores hues there).
SUMS_FROM_FULL = [0, 1, 2, 3, 4, (5, 6), 13, 14, 15, 16, 22, 24]
_MR_NAMES = ('rgb_sums', 'counts', 'contact', 'background_sum', 'p', 'intr', 'near', 'smooth',
             'linear_sums', 'linear_background', 'perimeter', 'restored', 'hue')


def sums_features(a: dict, min_contact: int):
    """(pairs (K, 2) int, X (K, 14)) from merge_regions' arguments ``a`` only (by name).

    Pairs: contact >= ``min_contact``, sorted. Per pair (i, j) with counts n, contact c:
    log c, c / sqrt(min n), c / sqrt(max n), log min n, log max n, 1 - smooth / c, L1 of the
    mean chromaticities (rgb_sums / sum), the same of linear_sums (rgb_sums when None), the
    specular-free hue L1 as ``_hue_distance`` (0 when unknown, no hue given or the frame blurred,
    ``restored`` given, as merge_regions ignores it) and that flag, |log((mean R+G+B of i + 1)
    / (of j + 1))|, c / max(min perimeter, 1) (0 without perimeter); then CLIP_FEATURES.
    """
    contact, p = a['contact'], a['p']
    pairs = sorted(k for k, c in contact.items() if c >= min_contact)
    if not pairs:
        return np.zeros((0, 2), int), np.zeros((0, len(SUMS_FEATURES) + len(CLIP_FEATURES)))
    pr = np.array(pairs, np.int64)
    ids = sorted(a['rgb_sums'])
    pos = {r: k for k, r in enumerate(ids)}
    ii, jj = np.array([pos[i] for i in pr[:, 0]]), np.array([pos[j] for j in pr[:, 1]])
    rgb = np.array([np.asarray(a['rgb_sums'][r], np.float64) for r in ids])
    lin_d = a['linear_sums'] if a['linear_sums'] is not None else a['rgb_sums']
    lin = np.array([np.asarray(lin_d[r], np.float64) for r in ids])
    cnt = np.array([float(a['counts'][r]) for r in ids])
    c = np.array([float(contact[k]) for k in pairs])
    smooth = a['smooth'] or {}
    sm = np.array([float(smooth.get(k, 0)) for k in pairs])
    per = a['perimeter']

    def chroma(v):
        return v / np.maximum(v.sum(axis=-1, keepdims=True), 1e-9)

    small, large = np.minimum(cnt[ii], cnt[jj]), np.maximum(cnt[ii], cnt[jj])
    hue_l1, hk = np.zeros(len(pairs)), np.zeros(len(pairs))
    if a['hue'] is not None and a['restored'] is None:
        hs = np.array([np.asarray(a['hue'][0][r], np.float64) for r in ids])
        hn = np.array([float(a['hue'][1][r]) for r in ids])
        known = (hn >= p.merge_hue_min_px_for(a['intr'])) \
            & (hs.sum(1) >= p.merge_hue_min_level * hn)
        hk = (known[ii] & known[jj]).astype(float)
        hue_l1 = np.where(hk > 0, np.abs(chroma(hs[ii]) - chroma(hs[jj])).sum(1), 0.0)
    bright = rgb.sum(1) / np.maximum(cnt, 1)
    if per is not None:
        pm = np.array([float(per[r]) for r in ids])
        encl = c / np.maximum(np.minimum(pm[ii], pm[jj]), 1)
    else:
        encl = np.zeros(len(pairs))
    X = np.stack([  # noqa: N806
        np.log(c), c / np.sqrt(small), c / np.sqrt(large), np.log(small), np.log(large),
        1 - sm / c, np.abs(chroma(rgb[ii]) - chroma(rgb[jj])).sum(1),
        np.abs(chroma(lin[ii]) - chroma(lin[jj])).sum(1), hue_l1, hk,
        np.abs(np.log((bright[ii] + 1) / (bright[jj] + 1))), encl], 1)
    share = np.zeros(len(ids))
    if a['hue'] is not None and a['restored'] is None:
        share = 1 - np.array([float(a['hue'][1][r]) for r in ids]) / np.maximum(cnt, 1)
    X = np.c_[X, np.maximum(share[ii], share[jj]), np.minimum(share[ii], share[jj])]  # noqa: N806
    return pr, X


def sums_from_full(X: np.ndarray) -> np.ndarray:  # noqa: N803
    """The sums subset taken from the 26 columns (a check; see SUMS_FROM_FULL)."""
    return np.stack([X[:, k[0]] + X[:, k[1]] if isinstance(k, tuple) else X[:, k]
                     for k in SUMS_FROM_FULL], 1)

# --- in-process wrappers (package unchanged) -------------------------------------------------
# CTX['mode']: None (pass through), 'collect' (record pairs), 'veto' (learned), 'pair_oracle',
# 'bnd_oracle' (labels). CTX['cuts'] holds the crop's per-pixel cuts of the current call.
CTX: dict = {'mode': None, 'cuts': {}, 'grow': None, 'label': None, 'model': None,
             'thr': 0.5, 'pairs': [], 'frame': -1, 'veto_ms': 0.0}
# TAG[0]: file-name suffix ('' for the 26 features, '_sums' for --features sums); MODEL[0]:
# the classifier file choose / evaluate / pairstats use.
TAG = ['']
MODEL = [OUT / 'model.npz']
_orig = {'merge_grown': deployed._merge_grown, 'merge_regions': merging.merge_regions}


def _capture(name: str, fn):
    def wrapped(*a, **k):
        out = fn(*a, **k)
        CTX['cuts'][name] = out
        return out
    return wrapped


for _n in ('color_cut', 'hue_cut', 'depth_cut', 'crease_cut'):
    setattr(deployed, _n, _capture(_n, getattr(deployed, _n)))


def _merge_grown(grown, color_rgb, mask, rows, cols, crop_idx, near_fg, no_depth, height,
                 r0, c0, n, p, intr, frame_height, sized=None):
    CTX['grow'] = dict(grown=grown, color=color_rgb, crop_idx=crop_idx, no_depth=no_depth,
                       height=height, r0=r0, c0=c0, n=n, p=p, sized=sized or intr)
    try:
        return _orig['merge_grown'](grown, color_rgb, mask, rows, cols, crop_idx, near_fg,
                                    no_depth, height, r0, c0, n, p, intr, frame_height, sized)
    finally:
        CTX['grow'] = None
        CTX['cuts'] = {}


def pair_features(g: dict, cuts: dict, min_contact: int):
    """(pairs (K, 2) int, X (K, F) float64, border stats) for region pairs with enough contact."""
    grown, p, n = g['grown'], g['p'], g['n']
    hh, ww = grown.shape
    r0, c0 = g['r0'], g['c0']
    col = g['color'][r0:r0 + hh, c0:c0 + ww].astype(np.float64)
    height = g['height']
    nod = g['no_depth']
    clip = (col >= p.merge_clip_level).all(axis=-1)
    cutm = {k: cuts.get(k, np.zeros(grown.shape, bool)) for k in
            ('color_cut', 'hue_cut', 'depth_cut', 'crease_cut')}
    # per-region statistics
    flat = grown.reshape(-1)
    lab = flat[g['crop_idx']].astype(np.intp)
    px = col.reshape(-1, 3)[g['crop_idx']]
    lin = linear_light(px)
    cnt = np.bincount(lab, None, n + 1).astype(np.float64)
    sums = np.stack([np.bincount(lab, px[:, k], n + 1) for k in range(3)], 1)
    lsums = np.stack([np.bincount(lab, lin[:, k], n + 1) for k in range(3)], 1)
    unc = px.max(axis=1) < p.merge_clip_level
    sf = np.where(unc[:, None], lin - lin.min(axis=1, keepdims=True), 0.0)
    hsum = np.stack([np.bincount(lab, sf[:, k], n + 1) for k in range(3)], 1)
    hn = np.bincount(lab, unc, n + 1)
    hpx = height.reshape(-1)[g['crop_idx']]
    ok = np.isfinite(hpx)
    hcnt = np.bincount(lab[ok], None, n + 1)
    hmean = np.bincount(lab[ok], hpx[ok], n + 1) / np.maximum(hcnt, 1)
    top = np.full(n + 1, np.nan)
    if ok.any():
        o = np.lexsort((hpx[ok], lab[ok]))
        ll, hv = lab[ok][o], hpx[ok][o]
        last = np.r_[ll[1:] != ll[:-1], True]
        top[ll[last]] = hv[last]
    perim = np.zeros(n + 1)
    # border pixel pairs
    parts = collections.defaultdict(list)
    for sa, sb in (((slice(None, -1), slice(None)), (slice(1, None), slice(None))),
                   ((slice(None), slice(None, -1)), (slice(None), slice(1, None)))):
        a, b = grown[sa], grown[sb]
        differ = a != b
        perim += np.bincount(a[differ], None, n + 1) + np.bincount(b[differ], None, n + 1)
        m = differ & (a > 0) & (b > 0)
        av, bv = a[m].astype(np.int64), b[m].astype(np.int64)
        lo_first = av < bv
        parts['key'].append(np.minimum(av, bv) * (n + 1) + np.maximum(av, bv))
        ha, hb = height[sa][m], height[sb][m]
        hlo, hhi = np.where(lo_first, ha, hb), np.where(lo_first, hb, ha)
        parts['hlo'].append(hlo)
        parts['hhi'].append(hhi)
        ca, cb = col[sa][m], col[sb][m]
        parts['clo'].append(np.where(lo_first[:, None], ca, cb))
        parts['chi'].append(np.where(lo_first[:, None], cb, ca))
        parts['hole'].append(nod[sa][m] | nod[sb][m])
        parts['clip'].append(clip[sa][m] | clip[sb][m])
        for k, cm in cutm.items():
            parts[k].append(cm[sa][m] | cm[sb][m])
    for e in grown[0], grown[-1], grown[:, 0], grown[:, -1]:
        perim += np.bincount(e, None, n + 1)
    P = {k: np.concatenate(v) for k, v in parts.items()}  # noqa: N806
    if P['key'].size == 0:
        return np.zeros((0, 2), int), np.zeros((0, len(FEATURES))), None
    keys, inv, contact = np.unique(P['key'], return_inverse=True, return_counts=True)
    sel = contact >= min_contact
    if not sel.any():
        return np.zeros((0, 2), int), np.zeros((0, len(FEATURES))), None
    K = keys.size  # noqa: N806

    def mean_of(v):
        return np.bincount(inv, v.astype(np.float64), K) / contact

    with np.errstate(invalid='ignore'):
        dh = np.abs(P['hlo'] - P['hhi'])
        known = np.isfinite(dh)
        step = known & (dh > p.depth_step)
        nk = np.bincount(inv, known, K)
        abs_dh = np.bincount(inv, np.where(known, dh, 0.0), K) / np.maximum(nk, 1)
        klo, khi = np.isfinite(P['hlo']), np.isfinite(P['hhi'])
        side_lo = np.bincount(inv, np.where(klo, P['hlo'], 0), K) / np.maximum(
            np.bincount(inv, klo, K), 1)
        side_hi = np.bincount(inv, np.where(khi, P['hhi'], 0), K) / np.maximum(
            np.bincount(inv, khi, K), 1)
    slo = np.stack([np.bincount(inv, P['clo'][:, k], K) for k in range(3)], 1)
    shi = np.stack([np.bincount(inv, P['chi'][:, k], K) for k in range(3)], 1)
    i, j = np.divmod(keys, n + 1)

    def chroma(s):
        return s / np.maximum(s.sum(axis=-1, keepdims=True), 1e-9)

    ci, cj = cnt[i], cnt[j]
    small, large = np.minimum(ci, cj), np.maximum(ci, cj)
    hue_px = p.merge_hue_min_px_for(g['sized'])
    hk = ((hn[i] >= hue_px) & (hn[j] >= hue_px)
          & (hsum[i].sum(1) >= p.merge_hue_min_level * hn[i])
          & (hsum[j].sum(1) >= p.merge_hue_min_level * hn[j]))
    hue_l1 = np.where(hk, np.abs(chroma(hsum[i]) - chroma(hsum[j])).sum(1), 0.0)
    bright_i, bright_j = sums[i].sum(1) / ci, sums[j].sum(1) / cj
    sb_lo, sb_hi = slo.sum(1) / contact, shi.sum(1) / contact
    X = np.stack([  # noqa: N806
        np.log(contact), contact / np.sqrt(small), contact / np.sqrt(large), np.log(small),
        np.log(large), mean_of(step), mean_of(~known), mean_of(P['hole']), mean_of(P['clip']),
        mean_of(P['color_cut']), mean_of(P['hue_cut']), mean_of(P['depth_cut']),
        mean_of(P['crease_cut']),
        np.abs(chroma(sums[i]) - chroma(sums[j])).sum(1),
        np.abs(chroma(lsums[i]) - chroma(lsums[j])).sum(1), hue_l1, hk.astype(float),
        np.abs(chroma(slo) - chroma(shi)).sum(1),
        np.nan_to_num(abs_dh) * 1e3, np.nan_to_num(np.abs(side_lo - side_hi)) * 1e3,
        np.nan_to_num(np.abs(hmean[i] - hmean[j])) * 1e3,
        np.nan_to_num(np.abs(top[i] - top[j])) * 1e3,
        np.abs(np.log((bright_i + 1) / (bright_j + 1))),
        np.abs(np.log((sb_lo + 1) / (sb_hi + 1))),
        contact / np.maximum(np.minimum(perim[i], perim[j]), 1),
        np.nan_to_num(np.fmax(top[i], top[j])) * 1e3,
    ], 1)
    return np.stack([i, j], 1)[sel], X[sel], (keys, inv, contact, P, sel)


def _majority(g: dict, label_crop: np.ndarray) -> np.ndarray:
    """Majority instance label per grown region (0..n)."""
    n = g['n']
    lab = g['grown'].reshape(-1)[g['crop_idx']].astype(np.int64)
    lbl = label_crop.reshape(-1)[g['crop_idx']].astype(np.int64)
    L = int(lbl.max()) + 1  # noqa: N806
    tab = np.bincount(lab * L + lbl, None, (n + 1) * L).reshape(n + 1, L)
    return tab.argmax(1)


def predict(model: dict, X: np.ndarray) -> np.ndarray:  # noqa: N803
    """Probability of 'two objects' per row of X."""
    z = (X - model['mu']) / model['sd']
    if model['kind'] == 'lr':
        s = z @ model['w'] + model['b']
    else:
        h = np.maximum(z @ model['w1'] + model['b1'], 0.0)
        s = h @ model['w2'] + model['b2']
    return 1.0 / (1.0 + np.exp(-s))


def _merge_regions(rgb_sums, counts, contact, background_sum, p, intr, near=None,
                   smooth=None, *rest, **kw):
    mode, g = CTX['mode'], CTX['grow']
    if mode is None or g is None or not contact:
        return _orig['merge_regions'](rgb_sums, counts, contact, background_sum, p, intr,
                                      near, smooth, *rest, **kw)
    t_veto = time.perf_counter()
    args = dict(zip(_MR_NAMES, (rgb_sums, counts, contact, background_sum, p, intr, near,
                                smooth) + tuple(rest)))
    args.update(kw)
    for k in _MR_NAMES:
        args.setdefault(k, None)
    sums_model = mode == 'veto' and CTX['model'] is not None \
        and CTX['model'].get('features') in ('sums', 'sums+clip')
    if sums_model:     # merge_regions' arguments only (no pixels, no border statistics)
        pairs, X = sums_features(args, p.merge_min_contact_for(intr))  # noqa: N806
        X = X[:, :len(CTX['model']['mu'])]  # noqa: N806
        stats = None
    else:
        pairs, X, stats = pair_features(g, CTX['cuts'], p.merge_min_contact_for(intr))  # noqa: N806
    if mode == 'collect':
        ps, Xs = sums_features(args, p.merge_min_contact_for(intr))  # noqa: N806
        assert np.array_equal(ps, pairs.reshape(-1, 2)), 'pairs differ'
    vetoed: set = set()
    if len(pairs) and mode in ('collect', 'pair_oracle', 'bnd_oracle'):
        hh, ww = g['grown'].shape
        lc = CTX['label'][g['r0']:g['r0'] + hh, g['c0']:g['c0'] + ww]
        maj = _majority(g, lc)
        two = (maj[pairs[:, 0]] != maj[pairs[:, 1]]) & (maj[pairs[:, 0]] > 0) \
            & (maj[pairs[:, 1]] > 0)
        if mode == 'pair_oracle':
            vetoed = {(int(a), int(b)) for (a, b), t in zip(pairs, two) if t}
        elif mode == 'bnd_oracle':
            keys, inv, contact_n, P, sel = stats  # noqa: N806
            tgt = bc.boundary_target(CTX['label'])[g['r0']:g['r0'] + hh, g['c0']:g['c0'] + ww]
            on = []
            for sa, sb in (((slice(None, -1), slice(None)), (slice(1, None), slice(None))),
                           ((slice(None), slice(None, -1)), (slice(None), slice(1, None)))):
                a, b = g['grown'][sa], g['grown'][sb]
                m = (a != b) & (a > 0) & (b > 0)
                on.append(tgt[sa][m] | tgt[sb][m])
            frac = np.bincount(inv, np.concatenate(on), keys.size) / contact_n
            kk = np.divmod(keys[frac >= 0.5], g['n'] + 1)
            vetoed = {(int(a), int(b)) for a, b in zip(*kk)}
    elif len(pairs) and mode == 'veto':
        prob = predict(CTX['model'], X)
        vetoed = {(int(a), int(b)) for (a, b), q in zip(pairs, prob) if q > CTX['thr']}
    if mode == 'veto':
        CTX['veto_ms'] += (time.perf_counter() - t_veto) * 1e3
    if vetoed:
        contact = {k: v for k, v in contact.items() if k not in vetoed}
        if smooth is not None:
            smooth = {k: v for k, v in smooth.items() if k not in vetoed}
        if near is not None:
            near = {k for k in near if k not in vetoed}
    root = _orig['merge_regions'](rgb_sums, counts, contact, background_sum, p, intr, near,
                                  smooth, *rest, **kw)
    if mode == 'collect' and len(pairs):
        joined = np.array([root[int(a)] == root[int(b)] for a, b in pairs])
        CTX['pairs'].append((np.full(len(pairs), CTX['frame']), X, two, joined, Xs))
    return root


deployed._merge_grown = _merge_grown
merging.merge_regions = _merge_regions


# --- data ------------------------------------------------------------------------------------
def frames(seed0: int, seed1: int, glare_every: int):
    """(seed, relight) of the range: every seed as drawn, glare for every ``glare_every``-th."""
    for s in range(seed0, seed1):
        bc.check_seed(s)
        yield s, ''
        if glare_every and (s - seed0 - 1) % glare_every == 0:   # 500001, 500004, ... (cached)
            yield s, GLARE


def collect(args) -> None:
    """Pairs with features and labels: 'train' (fit) and 'val' (threshold) sets."""
    collect_sets({'train': (500000, 500400, 3), 'val': (500400, 500500, 1)})


def collect_sets(sets: dict) -> None:
    """Per set name: (seed0, seed1, glare_every) -> /tmp/pair_veto/pairs_NAME.npz."""
    for name, (s0, s1, ge) in sets.items():
        CTX['pairs'] = []
        meta = []
        t0 = time.time()
        for k, (seed, rl) in enumerate(frames(s0, s1, ge)):
            d = bc.frame(seed, bc.CACHE, rl)
            color = bc.normalised(d)
            CTX.update(mode='collect', label=d['label'], frame=k)
            locate_objects(color, d['depth_mm'], d['intr'], d['ext'], d['lp'])
            CTX.update(mode=None, label=None)
            meta.append((seed, 1 if rl else 0))
        f = [np.concatenate([x[i] for x in CTX['pairs']]) for i in range(5)]
        np.savez(OUT / f'pairs{TAG[0]}_{name}.npz', frame=f[0], X=f[1], two=f[2], joined=f[3],
                 Xs=f[4], meta=np.array(meta))
        print(f'{name}: {len(meta)} frames, {len(f[0])} pairs, {int(f[2].sum())} two-object, '
              f'{int(f[3].sum())} joined by the shipped locator, '
              f'{int((f[2] & f[3]).sum())} wrongly joined; {time.time() - t0:.0f} s', flush=True)


def _auc(y: np.ndarray, s: np.ndarray) -> float:
    o = np.argsort(s)
    r = np.empty(len(s))
    r[o] = np.arange(1, len(s) + 1)
    npos = y.sum()
    return float((r[y].sum() - npos * (npos + 1) / 2) / max(npos * (len(y) - npos), 1))


def fit_lr(z: np.ndarray, y: np.ndarray, l2: float = 1e-2, iters: int = 50):
    """L2 logistic regression by Newton's method (balanced class weights)."""
    A = np.c_[z, np.ones(len(z))]  # noqa: N806
    wt = np.where(y, 0.5 / y.mean(), 0.5 / (1 - y.mean()))
    w = np.zeros(A.shape[1])
    reg = l2 * np.r_[np.ones(z.shape[1]), 0.0] * len(z)
    for _ in range(iters):
        q = 1 / (1 + np.exp(-A @ w))
        grad = A.T @ (wt * (q - y)) + reg * w
        H = (A * (wt * q * (1 - q))[:, None]).T @ A + np.diag(reg + 1e-9)  # noqa: N806
        step = np.linalg.solve(H, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w[:-1], w[-1]


def fit_mlp(z: np.ndarray, y: np.ndarray, hidden: int = 16, epochs: int = 300):
    """One hidden ReLU layer, Adam, class-weighted BCE; weights as numpy."""
    import torch
    torch.manual_seed(0)
    xt, yt = torch.tensor(z, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)
    net = torch.nn.Sequential(torch.nn.Linear(z.shape[1], hidden), torch.nn.ReLU(),
                              torch.nn.Linear(hidden, 1))
    opt = torch.optim.Adam(net.parameters(), 1e-2, weight_decay=1e-4)
    pw = torch.tensor((1 - y.mean()) / y.mean(), dtype=torch.float32)
    for _ in range(epochs):
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(net(xt)[:, 0], yt,
                                                                    pos_weight=pw)
        loss.backward()
        opt.step()
    return {k: v.detach().numpy().astype(np.float64) for k, v in
            zip(('w1', 'b1', 'w2', 'b2'), (net[0].weight.T, net[0].bias, net[2].weight.T[:, 0],
                                             net[2].bias[0]))}


def fit(args) -> None:
    """Fit both classifiers, report AUCs / coefficients / importance, save one."""
    tr, va = np.load(OUT / f'pairs{TAG[0]}_train.npz'), np.load(OUT / f'pairs{TAG[0]}_val.npz')
    col = 'Xs' if TAG[0] else 'X'
    names = {'': FEATURES, '_sums': SUMS_FEATURES}.get(TAG[0], SUMS_FEATURES + CLIP_FEATURES)
    extra = {'features': {'_sums': 'sums', '_sumsclip': 'sums+clip'}[TAG[0]]} if TAG[0] else {}
    X, y = tr[col][:, :len(names)], tr['two'].astype(bool)  # noqa: N806
    XV = va[col][:, :len(names)]  # noqa: N806
    mu, sd = X.mean(0), X.std(0) + 1e-9
    z = (X - mu) / sd
    lines = [f'train pairs {len(y)} (two-object {int(y.sum())}), '
             f'val pairs {len(va["two"])} (two-object {int(va["two"].sum())})']
    w, b = fit_lr(z, y)
    models = {'lr': dict(kind='lr', mu=mu, sd=sd, w=w, b=b, **extra)}
    models['mlp'] = dict(kind='mlp', mu=mu, sd=sd, **fit_mlp(z, y), **extra)
    yv, jv = va['two'].astype(bool), va['joined'].astype(bool)
    best = None
    for name, m in models.items():
        st, sv = predict(m, X), predict(m, XV)
        auc_j = _auc(yv[jv], sv[jv]) if yv[jv].any() and (~yv[jv]).any() else float('nan')
        lines.append(f'{name}: AUC train {_auc(y, st):.3f}, val {_auc(yv, sv):.3f}, '
                     f'val pairs the shipped locator joined {auc_j:.3f}')
        for t in (0.5, 0.7, 0.8, 0.9, 0.95):
            lines.append(f'  t={t}: val two-object recall {np.mean(sv[yv] > t):.3f}, '
                         f'one-object vetoed {np.mean(sv[~yv] > t):.3f}; among joined: '
                         f'wrong joins vetoed {int((sv[jv & yv] > t).sum())}/{int((jv & yv).sum())}'
                         f', right joins vetoed {int((sv[jv & ~yv] > t).sum())}/'
                         f'{int((jv & ~yv).sum())}')
        if best is None or _auc(yv, sv) > best[0]:
            best = (_auc(yv, sv), name)
    lines.append('logistic regression coefficients (standardised features), sorted by |w|:')
    for k in np.argsort(-np.abs(w)):
        lines.append(f'  {names[k]:24s} {w[k]:+.3f}  (mean {mu[k]:.3g}, sd {sd[k]:.3g})')
    lines.append(f'  intercept {b:+.3f}')
    # permutation importance on val (AUC drop) for both models
    rng = np.random.default_rng(0)
    for name, m in models.items():
        base_auc = _auc(yv, predict(m, XV))
        imp = []
        for k in range(X.shape[1]):
            Xp = XV.copy()  # noqa: N806
            Xp[:, k] = rng.permutation(Xp[:, k])
            imp.append(base_auc - _auc(yv, predict(m, Xp)))
        lines.append(f'{name} permutation importance (val AUC drop): ' + ', '.join(
            f'{names[k]} {imp[k]:.3f}' for k in np.argsort(imp)[::-1][:10]))
    use = args.model or best[1]
    for name, m in models.items():
        npar = sum(np.size(m[k]) for k in ('w', 'b', 'w1', 'b1', 'w2', 'b2') if k in m)
        lines.append(f'{name}: {npar} parameters (+ {2 * X.shape[1]} standardisation)')
        if TAG[0]:      # both kinds kept (choose --model KIND)
            np.savez(OUT / f'model{TAG[0]}_{name}.npz',
                     **{k: np.asarray(v) for k, v in m.items()})
    lines.append(f'saved model: {use}')
    np.savez(OUT / f'model{TAG[0]}.npz', **{k: np.asarray(v) for k, v in models[use].items()})
    (OUT / f'fit{TAG[0]}.txt').write_text('\n'.join(lines) + '\n')
    print('\n'.join(lines))


def load_model(path: Path | None = None) -> dict:
    """The saved classifier (fit; MODEL[0] unless ``path``)."""
    z = np.load(path or MODEL[0])
    return {k: (str(z[k]) if k in ('kind', 'features') else z[k]) for k in z.files}


def run_variants(seeds, relight: str, variants: list[str], misses: bool,
                 extra: dict | None = None) -> dict:
    """Per variant, per frame: the scores of the locator with that veto (order rotated).

    ``extra``: variant name -> (model, threshold) for variants not of the saved model.
    """
    rows = {v: [] for v in variants}
    model = load_model() if any(v.startswith('pair>') for v in variants) else None
    extra = extra or {}
    for i, seed in enumerate(seeds):
        bc.check_seed(seed)
        d = bc.frame(seed, bc.CACHE, relight)
        color = bc.normalised(d)
        lp = d['lp']
        k = i % len(variants)
        for name in variants[k:] + variants[:k]:
            mode = {'base': None, 'pair oracle': 'pair_oracle',
                    'bnd oracle 0.5': 'bnd_oracle'}.get(name, 'veto')
            CTX.update(mode=mode, label=d['label'] if 'oracle' in name else None, model=model,
                       veto_ms=0.0)
            if name in extra:
                CTX['model'], CTX['thr'] = extra[name]
            elif mode == 'veto':
                CTX['thr'] = float(name[len('pair>'):])
            t0 = time.perf_counter()
            objects = locate_objects(color, d['depth_mm'], d['intr'], d['ext'], lp)
            ms = (time.perf_counter() - t0) * 1e3
            CTX.update(mode=None, label=None)
            errors, false, matched = match_detections(objects, d['truth'])
            rows[name].append({
                'seed': seed, 'visible': len(d['truth']), 'detected': len(errors),
                'answers': len(objects), 'false': false, 'errors': errors, 'ms': ms,
                'veto_ms': CTX['veto_ms'], 'objects': int(d['factors']['objects']),
                'merged': merged_count(objects, d['label']),
                'misses': classify_misses(objects, d['truth'], matched, d['label'], color,
                                          lp.merge_clip_level) if misses else []})
    return rows


def table(rows: dict, title: str, misses: bool) -> str:
    """eval_boundary.py's markdown table (and miss classes)."""
    out = [title, '| variant | detected | 4-6 objects | false | merged | centroid p50 / p95 mm '
           '| locator ms p50 / p99 | veto ms p50 / p99 |', '|---|---|---|---|---|---|---|---|']

    def share(rs, key, of):
        n = sum(r[of] for r in rs)
        return f'{sum(r[key] for r in rs) / n:.1%}' if n else '-'

    for name, rs in rows.items():
        clutter = [r for r in rs if r['objects'] >= 4]
        e = np.array([x for r in rs for x in r['errors']]) * 1e3
        ms = np.array([r['ms'] for r in rs])
        vms = np.array([r['veto_ms'] for r in rs])
        vcol = f'{np.percentile(vms, 50):.2f} / {np.percentile(vms, 99):.2f}' \
            if vms.any() else '-'
        out.append(f"| {name} | {share(rs, 'detected', 'visible')} "
                   f"({sum(r['detected'] for r in rs)}/{sum(r['visible'] for r in rs)}) | "
                   f"{share(clutter, 'detected', 'visible')} | "
                   f"{share(rs, 'false', 'answers')} ({sum(r['false'] for r in rs)}) | "
                   f"{sum(r['merged'] for r in rs)} | "
                   f"{np.percentile(e, 50):.2f} / {np.percentile(e, 95):.2f} | "
                   f"{np.percentile(ms, 50):.1f} / {np.percentile(ms, 99):.1f} | {vcol} |")
    if misses:
        out.append('')
        for name, rs in rows.items():
            c = collections.Counter(m for r in rs for m in r['misses'])
            out.append(f'{name}: ' + ', '.join(f'{k} {v}' for k, v in c.most_common()))
    return '\n'.join(out)


def choose(args) -> None:
    """Thresholds on 500400-500499 as drawn + glare; saves the chosen one."""
    variants = ['base'] + [f'pair>{t:g}' for t in args.thresholds]
    res = {}
    text = []
    for rl in ('', GLARE):
        rows = run_variants(range(500400, 500500), rl, variants, False)
        res[rl] = rows
        text.append(table(rows, '\nchoose: training worlds 500400-500499'
                          + (f', relit {rl}' if rl else ', as drawn'), False))
        print(text[-1], flush=True)
    # criterion: detected - false (both conditions pooled), the most such; ties -> higher t
    score = {}
    for v in variants:
        score[v] = sum(sum(r['detected'] - r['false'] for r in res[rl][v]) for rl in res)
    text.append('\ncriterion detected - false (as drawn + glare): '
                + ', '.join(f'{v} {s}' for v, s in score.items()))
    best = max(variants[1:], key=lambda v: (score[v], float(v[5:])))
    text.append(f'chosen: {best}')
    print('\n'.join(text[-2:]))
    suffix = TAG[0] + (f'_{args.model}' if TAG[0] and args.model else '')
    (OUT / f'choose{suffix}.txt').write_text('\n'.join(text) + '\n')
    (OUT / f'threshold{suffix}.json').write_text(json.dumps({'threshold': float(best[5:])}))


def evaluate(args) -> None:
    """The report table on --seed0.. (default 500500-500799)."""
    t = args.threshold if args.threshold is not None else \
        json.loads((OUT / f'threshold{TAG[0]}.json').read_text())['threshold']
    variants = ['base', f'pair>{t:g}', 'pair oracle', 'bnd oracle 0.5']
    extra = {}
    for k, (path, thr) in enumerate(args.extra or []):
        m = load_model(Path(path))
        name = f"pair[{m['kind']}/{m.get('features', '26')}]" \
            f">{float(thr):g}"
        extra[name] = (m, float(thr))
        variants.insert(2 + k, name)
    rows = run_variants(range(args.seed0, args.seed0 + args.scenes), args.relight, variants,
                        True, extra)
    txt = table(rows, f'training worlds {args.seed0}-{args.seed0 + args.scenes - 1}'
                + (f', relit {args.relight}' if args.relight else ', as drawn')
                + f'; pair veto threshold {t:g}'
                + (f' (features: {TAG[0][1:]}, merge_regions inputs only)' if TAG[0] else ''),
                True)
    print(txt)
    tag = args.relight.replace(':', 'x') or 'drawn'
    (OUT / f'evaluate{TAG[0]}_{args.seed0}_{tag}.txt').write_text(txt + '\n')


def pairstats(args) -> None:
    """Pair-level scores of the saved model on the report worlds (as drawn + glare), no veto."""
    s0 = args.seed0
    collect_sets({f'report_{s0}': (s0, s0 + args.scenes, 1)})
    z = np.load(OUT / f'pairs{TAG[0]}_report_{s0}.npz')
    m = load_model()
    t = json.loads((OUT / f'threshold{TAG[0]}.json').read_text())['threshold']
    q = predict(m, z['Xs'][:, :len(m['mu'])] if TAG[0] else z['X'])
    y, j = z['two'].astype(bool), z['joined'].astype(bool)
    glare = z['meta'][z['frame'], 1] == 1
    lines = [f'pair level, {s0}-{s0 + args.scenes - 1}, saved {m["kind"]} model, t={t:g}']
    for name, sel in (('as drawn', ~glare), ('glare', glare), ('both', np.ones_like(glare))):
        yy, jj, qq = y[sel], j[sel], q[sel]
        lines.append(
            f'{name}: pairs {sel.sum()}, two-object {yy.sum()}, AUC {_auc(yy, qq):.3f}; '
            f'shipped joins: wrong {int((jj & yy).sum())} (vetoed {int((qq[jj & yy] > t).sum())})'
            f', right {int((jj & ~yy).sum())} (vetoed {int((qq[jj & ~yy] > t).sum())})')
    (OUT / f'pairstats{TAG[0]}_{s0}.txt').write_text('\n'.join(lines) + '\n')
    print('\n'.join(lines))


WEIGHTS_MODULE = (Path(__file__).resolve().parents[2] / 'edge_loop' / 'kernels' / 'object_locator'
                  / 'pair_veto_weights.py')


def arr_names(names: list[str]) -> str:
    """A tuple of names as wrapped source."""
    return '(\n' + textwrap.fill(', '.join(repr(n) for n in names) + ',', 96,
                                 initial_indent='    ', subsequent_indent='    ') + '\n)'


def export(args) -> None:
    """Write the sums model (``--features sums``) as the locator's weights module."""
    if TAG[0] != '_sums':
        raise SystemExit('export: only the --features sums model runs inside merge_regions')
    m = dict(np.load(MODEL[0]))
    if str(m['kind']) != 'mlp' or len(m['mu']) != len(SUMS_FEATURES):
        raise SystemExit(f'export: {MODEL[0]} is not a {len(SUMS_FEATURES)}-feature MLP')

    def arr(a, indent: str = '') -> str:
        a, inner = np.asarray(a, np.float64), indent + '    '
        if a.ndim == 2:     # one row after another
            return '(\n' + ''.join(f'{inner}{arr(r, inner)},\n' for r in a) + indent + ')'
        return '(\n' + textwrap.fill(', '.join(repr(float(x)) for x in a) + ',', 96,
                                     initial_indent=inner, subsequent_indent=inner) \
            + f'\n{indent})'

    WEIGHTS_MODULE.write_text(
        '# SPDX-FileCopyrightText: 2026 edge_loop developers\n'
        '# SPDX-License-Identifier: Apache-2.0\n'
        '"""Weights of the locator\'s pair veto (:mod:`.pair_veto`); generated, do not edit.\n\n'
        'Written by ``tools/boundary/pair_veto.py export --features sums`` from the MLP that\n'
        '``collect --features sums`` + ``fit --features sums`` (seeded) fit on training-world\n'
        'pairs (docs/worlds.md).\n"""\n\n'
        'FEATURES = ' + arr_names(SUMS_FEATURES) + '\n'
        f'MEAN = {arr(m["mu"])}\n'
        f'SCALE = {arr(m["sd"])}\n'
        f'W1 = {arr(m["w1"])}\n'
        f'B1 = {arr(m["b1"])}\n'
        f'W2 = {arr(m["w2"])}\n'
        f'B2 = {float(m["b2"])!r}\n')
    print(f'wrote {WEIGHTS_MODULE}')


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('step', choices=['collect', 'fit', 'choose', 'evaluate', 'pairstats',
                                     'export'])
    ap.add_argument('--model', choices=['lr', 'mlp'], default=None,
                    help='fit: the model to save (default: the better val AUC)')
    ap.add_argument('--thresholds', type=float, nargs='*',
                    default=[0.5, 0.7, 0.8, 0.9, 0.95])
    ap.add_argument('--threshold', type=float, default=None)
    ap.add_argument('--seed0', type=int, default=500500)
    ap.add_argument('--scenes', type=int, default=300)
    ap.add_argument('--relight', default='')
    ap.add_argument('--extra', nargs=2, metavar=('MODEL_NPZ', 'THRESHOLD'), default=None,
                    action='append',
                    help='evaluate: also a row with this saved model and threshold (repeatable)')
    ap.add_argument('--features', choices=['full', 'sums', 'sums+clip'], default='full',
                    help="'sums': only what merging.merge_regions receives (SUMS_FEATURES); "
                         "files get the suffix _sums; 'sums+clip': + CLIP_FEATURES, _sumsclip")
    args = ap.parse_args(argv)
    TAG[0] = {'full': '', 'sums': '_sums', 'sums+clip': '_sumsclip'}[args.features]
    MODEL[0] = OUT / (f'model{TAG[0]}_{args.model}.npz' if TAG[0] and args.model
                      and args.step == 'choose' else f'model{TAG[0]}.npz')
    bc.single_thread()
    bc.check_seed(args.seed0 + args.scenes - 1)
    OUT.mkdir(parents=True, exist_ok=True)
    {'collect': collect, 'fit': fit, 'choose': choose, 'evaluate': evaluate,
     'pairstats': pairstats, 'export': export}[args.step](args)
    return 0


if __name__ == '__main__':
    sys.exit(main())
