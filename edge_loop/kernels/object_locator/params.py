# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The locator's parameters (:class:`LocatorParams`) and their scaling with resolution.

Part of :mod:`edge_loop.kernels.object_locator` (the method is in its docstring).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edge_loop.kernels.camera import Extrinsics, Intrinsics

NOMINAL_FX = 615.0
# The object sizes in pixels below were chosen with the shipped camera: fx = 615 (D435 VGA),
# 0.75 m above the table, straight down, so 0.741 m from the foreground plane (min_height,
# 9 mm) under it. An object's pixel count goes with (fx / range)^2, not with fx alone.
NOMINAL_RANGE = 0.741


@dataclass(frozen=True)
class LocatorParams:
    """Tunable parameters of the locator (metres unless stated)."""

    min_height: float = 0.009     # tray floor (5 mm) + 4 mm, 5 sigma of the depth noise
    max_height: float = 0.35
    roi_x: tuple[float, float] = (-0.194, 0.194)  # tray interior (0.40 x 0.30) less 6 mm
    roi_y: tuple[float, float] = (-0.144, 0.144)
    color_step: float = 0.1       # L1 chromaticity difference that separates two objects
    # The same cut on specular-free hue (linear light less its smallest channel, as a
    # chromaticity; :func:`hue_cut`): glare and highlights add white light that brings two
    # touching objects' display chromaticities within color_step of each other (a teal cube
    # on a green bar, 0.03 apart) but leaves their hues apart (0.6). Only where both pixels'
    # 3x3 means have no channel at merge_clip_level and at least hue_min_level of such light
    # (a grey or a clipped white has no hue; a faint one is noise). 0 switches it off.
    # Training scenes 300000-300199 against the sensor-visible objects, all eight
    # conditions: misses / false detections 45 / 44 -> 37 / 42 (glare 19 / 10 -> 16 / 9,
    # colour cast 3 / 4 -> 1 / 4, nominal, overexposed and flicker a miss fewer each; 0.1:
    # 39 / 44, motion blur two misses more; 0.2: 38 / 43, both measured with a first version
    # that took the hue of the 3x3 mean of display values, which gave the same counts at
    # 0.15); hue_min_level 0.02: 37 / 41, 0.08: 40 / 43. Validation 310000-310149: 19 / 21 ->
    # 15 / 20. See ``hue_cut`` below.
    hue_step: float = 0.15
    hue_min_level: float = 0.04
    depth_step: float = 0.0055    # height jump (m) between 4-neighbours that cuts as well
                                  # (~4 sigma of the depth noise; between 1 mm steps of 16UC1)
    # Concave crease cut (:func:`crease_cut`): two touching objects of one colour at one
    # height meet in a valley, where their surfaces turn towards each other; one object's
    # surface (a box edge, a cylinder) turns away (convex). Normals from the foreground's
    # world points (central differences crease_baseline px apart, none across a height step),
    # averaged over a crease_window square, that differ by more than crease_deg between
    # 4-neighbours and turn towards each other cut both pixels. 0 switches it off. Chosen on
    # training worlds (edge_loop.sim.worlds, user parameters, seeds 500500-500799; checked
    # on 500800-501099), detected / false / merged / centroid p95: 980 / 26 / 47 / 5.9 mm ->
    # 988 / 24 / 41 / 4.8 mm of 1029 (10 deg: 985 / 23 / 44 / 5.4; 6 deg: 26 false);
    # check set 1005 / 26 / 56 / 6.3 -> 1010 / 25 / 51 / 5.0 of 1066. Baseline 1 px: more
    # found but 62 false against 52 (600 scenes); 3 px or a 7 px window: less of both.
    # Normals across a height step (the step's, not a surface's) found more (990 on the
    # first set) but widened the cut beside every step, which let a dark object take a strip
    # of its brighter neighbour and join it (docs/clutter.md).
    crease_deg: float = 8.0
    crease_baseline: int = 2      # image pixels
    crease_window: int = 5        # image pixels
    # Necks (necks.py): a region is cut where its outline narrows to a saddle of the distance
    # transform at most neck_ratio x the lower of two peaks of at least neck_min_peak_px (VGA
    # px at the shipped range, 6 mm; scaled like the sizes below), into pieces of at least
    # neck_min_piece x min_pixels; regions filling neck_solidity of their hull are skipped.
    # Chosen on training worlds 500500-500799 (tools/locator_worlds.py; detected / false /
    # merged / centroid p95 of 1029 objects: off 988 / 24 / 41 / 4.8 mm, on 1003 / 25 / 32 /
    # 4.4 mm; ratio 0.5 and 0.7 cut fewer or falsely more, pieces >= 1 x min_pixels gave more
    # false detections; the hull test changes no answer there).
    neck_ratio: float = 0.6       # 0: off
    neck_min_peak_px: float = 5.0
    neck_min_piece: float = 1.5
    neck_solidity: float = 0.9
    neck_min_color: float = 0.01  # pieces' mean chromaticities differ at least this (L1)
    size_with_range: bool = True  # object pixel sizes follow the camera's range (sizing_intrinsics)
    min_pixels: int = 80          # at fx = 615 (VGA); scaled by (fx / 615)^2
    split_pixels: int = 30        # a colour piece this big (VGA) is a region of its own
    bridge_px: int = 2            # depth holes within this many pixels connect the foreground
    tie_height: float = 0.01      # tops closer than this are "equally high" for selection
    # Region merge, chosen on training-object scenes (bench/bench_vision.py --split train
    # --seed 300000 --scenes 40) and checked on --seed 310000 --scenes 30:
    merge_color: float = 0.03     # mean-chromaticity L1 below which touching regions join
    merge_small_color: float = 0.1   # the same limit when one region is small ...
    merge_small_pixels: int = 150    # ... i.e. under this many pixels (VGA)
    merge_min_contact: int = 5    # 4-neighbour pixel pairs two regions must share (VGA)
    merge_max_blend: float = 0.8  # a blended piece keeps at least 1 - this of its colour
    merge_gap_px: int = 25        # regions this close (VGA px, 3 cm) of one colour join ...
    merge_gap_min_colour: float = 0.1    # ... if both differ this much from the floor colour
    # Touching regions on one continuous surface (their shared border has no height step over
    # depth_step along most of it and is long for the smaller region) join up to this colour
    # distance: a shading edge, a highlight or blur on one object, not two objects.
    merge_smooth_color: float = 0.15
    merge_smooth_len: float = 1.0     # smooth border pairs >= this x sqrt(smaller region px)
    merge_smooth_frac: float = 0.5    # ... and >= this fraction of the shared border
    merge_blend_len: float = 0.5      # blend test only if contact >= this x sqrt(smaller px)
    # The blended piece is the region nearer the floor's colour (not always the smaller: all
    # of a thin object is blurred, its paler sides outnumber its core); when it is the larger
    # one it must be a band along the other: pixels <= this x shared border (VGA px; ~2 cm,
    # about a blur's length). Chosen on training scenes 300000-300299 (non-glare: misses
    # 45 -> 44, false detections 108 -> 82), checked on 310000-310149 (10 -> 10, 32 -> 22).
    merge_blend_width: float = 16.0
    # Overexposure clips an object's brightest channel: its lit and shaded faces then differ
    # in chromaticity (the clipped channel stays at 255 while the others scale with the
    # light), and where they meet at the object's own occluding edge (a height step) neither
    # the colour nor the smooth-border test joins them. A channel whose mean over a region is
    # at least merge_clip_level is clipped; two regions with a clipped channel that is, in
    # both, at least as bright as every unclipped one (the object's dominant channel) and with
    # at least two channels unclipped in both join when the L1 between their chromaticities
    # over those channels is below merge_clip_color. Chosen on training scenes 300000-300299
    # (overexposed: misses 10 -> 9, false detections 20 -> 10; flicker false 7 -> 6; the other
    # conditions unchanged; 0.06: overexposed 9 / 9 but a miss more on validation), checked
    # on 310000-310149 (overexposed 4 -> 4, 9 -> 4; flicker 0 -> 0, 3 -> 1; others unchanged).
    # (Without the dominant-channel test different objects joined: training misses at 0.06
    # overexposed 10 -> 11, flicker 4 -> 5.
    # Glare, a depth blind spot: training misses 194 -> 195, false 25 -> 23; validation same.)
    merge_clip_level: float = 250.0
    merge_clip_color: float = 0.04
    # Two touching regions join (by any colour test) only if their shared border is at least
    # merge_contact_len x sqrt(smaller region's pixels) 4-neighbour pairs, besides the
    # merge_min_contact floor: the cut across one object (a shading edge, a blurred rim, a
    # clipped face) runs across the smaller region, about its width (sqrt of its area);
    # two objects that touch at a corner share a few pixels whatever their size, and under
    # overexposure or glare their washed-out colours agree. Chosen on training scenes
    # 300000-300299 (overexposed: misses 9 -> 7, false 10 -> 9, one cube and cylinder
    # joined at a corner; flat from 0.15 to 0.25; 0.3 also glare, sensor-visible misses
    # 51 -> 49 but false 16 -> 17; the smallest ratio of a correct join there is 0.29);
    # validation 310000-310149 unchanged in every condition at 0.2-0.3.
    merge_contact_len: float = 0.25
    # min_pixels keeps specks of noise and fragments out; an object seen partly through a
    # blind spot of the depth camera (glare saturating its IR: no depth over a large area)
    # is cut off by the spot, not small, so a component within bridge_px of a 4-connected
    # depth hole of at least blind_hole_px (VGA; the glare core is ~19000 px, the edge and
    # dropout holes of the sensor model a few hundred at most) stands from
    # partial_min_pixels (VGA) on. 20 is the smallest visible part the benchmark counts as
    # an object (MIN_VISIBLE_PIXELS). Training scenes 300000-300299, glare against the
    # sensor-visible objects: misses 51 -> 32, false 16 -> 18 (30: 38 / 18; 40: 43 / 17;
    # 60: 47 / 16; 15: 28 / 20); against the simulator's visibility (blind pixels count in
    # the centroid, so a partial view is off by > 3 cm) 195 -> 181, false 23 -> 30; the
    # other conditions have no such hole and are unchanged. Validation 310000-310149:
    # sensor-visible 18 -> 9, false 6 -> 8 (simulator's 92 -> 84, 9 -> 12).
    partial_min_pixels: int = 20
    blind_hole_px: int = 5000
    # A region whose border runs along one other region for at least merge_enclosed_frac of
    # its length (its perimeter: 4-neighbour pairs with anything else, the image edge
    # included), with at least merge_enclosed_smooth of that border free of a height step,
    # lies inside that region's outline on one continuous surface: seen from above, another
    # object can only lie inside an object's outline on top of it, across a height step
    # (where the camera sees its side face the border is smooth, a concave corner, but the
    # far side is a step: 50-65 % smooth on stacked boxes, 100 % on a flat patch). It joins
    # up to merge_enclosed_color: the core of a motion-blurred object inside its blurred rim,
    # a highlight or a printed patch. 0 switches the test off. Training scenes
    # 300000-300299: motion blur false detections 36 -> 33 (0.75: 34), no miss and no other
    # condition changed; validation 310000-310149 unchanged in every condition.
    merge_enclosed_frac: float = 0.6
    merge_enclosed_smooth: float = 0.9
    merge_enclosed_color: float = 0.5
    # Horizontal motion blur (the camera shaking during the exposure) smears the colour of
    # everything raised (objects, the tray's walls) over the floor beside it and not above or
    # below it; depth is not blurred, so it says where the raised things end. A frame is
    # blurred when the floor pixels within blur_probe_px left or right of a raised pixel
    # (not touching one) differ from the floor's median chromaticity by more, on average,
    # than those above or below one, by at least blur_leak_threshold (:func:`blur_leak`;
    # training scenes 300000-300299: 0.014-0.032 under motion blur, at most 0.007 under
    # harsh shadow and glare, overexposed at most 0.007 but one frame at 0.019, whose objects
    # came out the same; 300000-300029: at most 0.004 nominal, dim, colour cast, flicker).
    # In a blurred frame the light a region lost to the floor within blur_leak_px (VGA) of
    # it on its rows is summed back (:func:`blur_smear_sums`: a box blur keeps a row's sum
    # of light, so region + smear - floor under it is the region's own light, for blurs up
    # to 2 x blur_leak_px long), the floor under the smear estimated from the floor beyond
    # it (blur_floor_px box), and two touching regions also join when those restored mean
    # chromaticities (linear light) are within merge_blur_color: pieces of one object that
    # blur mixed with the floor unevenly (a thin part, a blurred-through rim). Training
    # scenes 300000-300299, motion blur: false detections 31 -> 21, misses 11 -> 11 (limit
    # 0.04 to 0.08 alike on the first 60 scenes; 0.15: two misses more there); validation
    # 310000-310149: false 6 -> 5, misses 6 -> 6; not one object list changed in any other
    # condition of those 300 training scenes or of 300 held-out ones (same frames, with and
    # without). blur_leak_px = 0 switches it off. A dark object's restored colour is a few
    # hundredths of full scale, where chromaticity is noise: pieces whose restored mean
    # linear colours are within merge_blur_linear (L1) join as well (its blurred wings
    # beside its core). Training scenes 300000-300299: false 21 -> 15, misses 11 -> 11
    # (0.02: 16 / 11; 0.06: 13 / 12; 0.08: 11 / 12); validation: false 5 -> 4, misses 6 -> 7.
    blur_leak_threshold: float = 0.011
    blur_probe_px: int = 7
    blur_leak_px: int = 8
    blur_floor_px: int = 41
    merge_blur_color: float = 0.06
    merge_blur_linear: float = 0.04
    # Glare adds light of the lamp's colour (white) to whatever it falls on: in linear light
    # a pixel is its surface's colour plus an achromatic part (the dichromatic reflection
    # model). Washed out like that, two objects of different hues get display
    # chromaticities within merge_color of each other and joined. Linear light less its
    # smallest channel keeps the hue whatever white is added (a specular-free colour), so
    # two regions whose mean specular-free chromaticities (unclipped pixels only: no channel
    # at merge_clip_level) differ by more than merge_hue_veto (L1) never join, when both
    # have at least merge_hue_min_px (VGA) such pixels carrying at least
    # merge_hue_min_level of it a pixel on average (greys and clipped whites have no hue to
    # compare). Not in a blurred frame (blur mixes the floor's hue into an object's edge)
    # nor for a region inside the other's outline (merge_enclosed_*: a print, a patch).
    # 0 switches it off. Training scenes 300000-300199 against the sensor-visible objects:
    # glare misses / false detections 19 / 12 -> 17 / 12 (a green and a pink object, a violet
    # and a blue one; 0.6: 18 / 12), motion blur 5 / 7 unchanged; 300200-300299 every
    # condition unchanged (with the veto in blurred frames too, motion blur false detections
    # 6 -> 11); validation 310000-310149 (glare, motion blur, overexposed, nominal)
    # unchanged. (Compare runs over the same conditions in the same order: the simulated
    # sensor noise depends on how many frames the scene rendered before.)
    merge_hue_veto: float = 0.3
    merge_hue_min_px: int = 30
    merge_hue_min_level: float = 0.03
    # The same white light also splits one object: the part nearer the glare (or under a
    # highlight) is washed paler than the rest, its display chromaticity off by more than
    # any colour limit although its specular-free hue is the same. Two touching regions
    # whose specular-free hues (as for the veto, both known) are within merge_hue_join (L1)
    # join, if they differ in added white (the smallest channel of their mean linear
    # colours) by at least merge_hue_join_white and share at least merge_hue_join_len x
    # sqrt(smaller region's pixels) border pairs (the pale part runs along the rest). Two
    # objects of one hue and different saturation (red and pink) look the same to this; the
    # white and border tests keep the ones seen on these scenes apart (two magenta cubes
    # touching along 9 pairs, 0.054 apart in white; dark red objects in dim and colour-cast
    # light, 0.03 apart in hue but with no white between them). Not in a blurred frame (no
    # hue is compared there). 0 switches it off. Training scenes 300000-300199 against the
    # sensor-visible objects, all eight conditions: misses / false detections 45 / 48 ->
    # 45 / 44 (glare 19 / 12 -> 19 / 10, overexposed and colour cast one false fewer each);
    # validation 310000-310149: 20 / 15 -> 20 / 14 (glare 8 -> 7 false), no other change.
    # Without the white and border tests: training 46 / 40 and validation 23 / 14 (a miss
    # more in dim, colour cast and flicker). Of the glare region pairs of one object with
    # both hues known, 43 of 45 agreed within 0.05; of two objects, none of 11 (the closest
    # 0.066).
    merge_hue_join: float = 0.05
    merge_hue_join_white: float = 0.05
    merge_hue_join_len: float = 0.5
    # The learned pair veto (.pair_veto): a touching pair whose probability of being two
    # objects exceeds this never joins directly (0: off). 0.7 was chosen on training worlds
    # 500400-500499 (detected - false, as drawn and glare-lit; tools/boundary/pair_veto.py);
    # on 500500-500799 it took detection 97.5 -> 97.9 % as drawn and 83.0 -> 86.0 % under glare
    # at 2.4 -> 2.5 % / 2.8 -> 2.6 % false detections, 0.4 ms a frame (docs/worlds.md). Off by
    # default: with it on, 16 of the locator's unit tests fail, mostly regions of one object
    # that a merge rule joins (an overexposed object's faces, one washed paler on one side, a
    # blurred thin part) and that it keeps apart.
    merge_pair_veto: float = 0.0

    def partial_min_pixels_for(self, intr: Intrinsics) -> int:
        """Minimum size of a component at a depth blind spot."""
        return max(1, int(round(self.partial_min_pixels * (intr.fx / NOMINAL_FX) ** 2)))

    def blind_hole_px_for(self, intr: Intrinsics) -> int:
        """Smallest 4-connected depth hole that is a blind spot."""
        return max(1, int(round(self.blind_hole_px * (intr.fx / NOMINAL_FX) ** 2)))
    # (the three merge_smooth_* and merge_blend_len chosen on the same training scenes:
    # non-glare misses 8 -> 7, false detections 9 -> 6; validation 3 -> 3, 12 -> 12)

    def min_pixels_for(self, intr: Intrinsics) -> int:
        """Minimum component size at the resolution of ``intr``."""
        return max(1, int(round(self.min_pixels * (intr.fx / NOMINAL_FX) ** 2)))

    def neck_min_peak_for(self, intr: Intrinsics) -> float:
        """Smallest distance-transform peak (pixels) that counts as an object's core."""
        return self.neck_min_peak_px * intr.fx / NOMINAL_FX

    def split_pixels_for(self, intr: Intrinsics) -> int:
        """Minimum size of a colour piece that stands as a region of its own."""
        return max(1, int(round(self.split_pixels * (intr.fx / NOMINAL_FX) ** 2)))

    def merge_small_pixels_for(self, intr: Intrinsics) -> int:
        """Size under which a region is merged with the looser colour limit."""
        return max(1, int(round(self.merge_small_pixels * (intr.fx / NOMINAL_FX) ** 2)))

    def merge_gap_px_for(self, intr: Intrinsics) -> int:
        """Largest gap (pixels, Chebyshev) across which two regions of one colour join."""
        return max(0, int(round(self.merge_gap_px * intr.fx / NOMINAL_FX)))

    def merge_blend_width_for(self, intr: Intrinsics) -> float:
        """Widest mean band (pixels) a blended region larger than its neighbour may be."""
        return self.merge_blend_width * intr.fx / NOMINAL_FX

    def merge_hue_min_px_for(self, intr: Intrinsics) -> int:
        """Unclipped pixels a region needs for its hue to be compared."""
        return max(1, int(round(self.merge_hue_min_px * (intr.fx / NOMINAL_FX) ** 2)))

    def merge_min_contact_for(self, intr: Intrinsics) -> int:
        """Shared border (pixel pairs, grows with fx) two regions need to be merged."""
        return max(1, int(round(self.merge_min_contact * intr.fx / NOMINAL_FX)))



def sizing_intrinsics(intr: Intrinsics, ext: Extrinsics, p: LocatorParams) -> Intrinsics:
    """The intrinsics that object sizes in pixels are scaled with, for this camera pose.

    ``intr`` with fx and fy multiplied by ``NOMINAL_RANGE`` / the camera's range to the
    workspace centre (the middle of ``roi_x`` x ``roi_y`` at ``min_height``): a camera at
    0.45 m sees an object in (0.741 / 0.45)^2 = 2.7 times the pixels of the shipped one, so
    ``min_pixels``, ``split_pixels``, the merge sizes and ``merge_gap_px`` (3 cm) are metric
    sizes whatever the camera's pose. The shipped pose gives ``intr`` itself. Sizes of sensor
    effects stay in image pixels (``blind_hole_px``, ``partial_min_pixels``, the blur probes).
    """
    if not p.size_with_range:
        return intr
    centre = np.array([0.5 * (p.roi_x[0] + p.roi_x[1]), 0.5 * (p.roi_y[0] + p.roi_y[1]),
                       p.min_height])
    rng = float(np.linalg.norm(centre - np.asarray(ext.translation, np.float64)))
    k = NOMINAL_RANGE / rng if rng > 1e-6 else 1.0
    if abs(k - 1.0) < 1e-9:
        return intr
    return Intrinsics(intr.fx * k, intr.fy * k, intr.cx, intr.cy, intr.width, intr.height)


DEFAULT_PARAMS = LocatorParams()
