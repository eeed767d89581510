# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""object_locator: every object in the tray and the one to pick next, from RGB-D frames.

Inputs: frames from :class:`edge_loop.transport.FrameReader` (shared memory or the contract's
colour / aligned depth / camera_info topics). Outputs, stamped with the frame's stamp and in
``world_frame``: ``/edge_loop/objects`` (PoseArray, always, empty when nothing),
``/edge_loop/object`` (PoseStamped, only when an object is found), the label image (mono8,
every frame: 0 = background, k = the k-th pose of ``/edge_loop/objects``; the grasp planner
plans on it instead of running the locator again; over shared memory with ``transport: shm``,
``/edge_loop/labels`` Image only while subscribed, see ``LabelWriter``), RViz markers on
``/edge_loop/markers`` (namespace ``objects``). A bad frame (wrong encoding, size mismatch,
missing camera_info, no valid depth) gives a throttled warning and a ``/diagnostics`` entry and
no output for that frame. A depth blind spot (glare) over at least ``blind_warn_share`` of the
tray turns the periodic ``/diagnostics`` summary to WARN: objects in it cannot be found, so an
empty list does not mean an empty tray. The kernel is
:func:`edge_loop.kernels.object_locator.locate_objects`; configure refuses to proceed unless it
matches ``config/verified.json`` (``require_verified``).

``device`` (``cpu`` | ``cuda`` | ``cuda:N`` | ``auto``) places the per-pixel part (height,
foreground, the colour / hue / depth cuts) on a GPU (:class:`edge_loop.kernels.gpu.locator.
LocatorMasks`: the frame's depth and colour go up, two bit-packed masks come back, no image);
the labelling and moments stay on the CPU. ``providers`` places segnet (``use_model``) on ONNX
Runtime execution providers, each gated by its own verified op (docs/placement.md).

Frame checks and the label image message are in :mod:`edge_loop.nodes.vision_common`.
"""

from __future__ import annotations

import time
from typing import Any

from geometry_msgs.msg import Pose, PoseArray, PoseStamped
from std_msgs.msg import ColorRGBA, Header
from visualization_msgs.msg import Marker, MarkerArray

from edge_loop import topics
from edge_loop.kernels import exposure
from edge_loop.kernels.camera import D435_VGA, nominal_intrinsics, warm_up_frame, yaw_to_quat
from edge_loop.kernels.object_locator import (
    USE_MODEL_DEFAULT,
    DetectedObject,
    LocatorParams,
    blind_spot_share,
    label_image,
    locate_objects,
    locate_objects_fused,
    rank_targets,
)
from edge_loop.nodes.stage_base import ConfigError, Param, StageNode, run_node
from edge_loop.nodes.stage_health import StageHealth, check_deployable_or_fail
from edge_loop.nodes.vision_common import (
    GATE_PARAMS,
    BadFrameError,
    LabelWriter,
    delete_all,
    extrinsics_from,
    frame_inputs,
)
from edge_loop.placement import (
    PlacementError,
    device_error,
    gated_providers,
    ort_provider_options,
    providers_error,
    resolve_device,
)

GPU_OP_NAME = 'object_locator.pixel_masks.cuda.float32'


def _pair(name: str, default: list[float], what: str, **kwargs: Any) -> Param:
    return Param(name, default, what, length=2,
                 check=lambda v: None if v[0] < v[1] else 'needs [min, max] with min < max',
                 **kwargs)


# The locator's segmentation settings.
LOCATOR_PARAMS = (
    Param('min_height', 0.009, 'Foreground: minimum height above the table (m)', min=0.0,
          max=0.2),
    Param('color_step', 0.1, 'Chromaticity step (L1) that separates touching objects',
          min=0.0, max=3.0),
    Param('hue_step', 0.15, 'Specular-free hue step (L1) that separates touching objects '
          'washed alike by glare or a highlight (0: off)', min=0.0, max=2.0),
    Param('min_pixels', 80, 'Smallest object at 640x480 (pixels; scaled with resolution)',
          min=1, max=100000),
    Param('crease_deg', LocatorParams().crease_deg, 'Concave crease between 4-neighbours '
          'that separates touching objects of one colour (deg between smoothed surface '
          'normals turning towards each other; 0: off)', min=0.0, max=90.0),
    Param('split_pixels', 30, 'Smallest colour piece that is a region of its own (640x480; '
          'regions of one colour join again)', min=1, max=100000),
    Param('merge_pair_veto', LocatorParams().merge_pair_veto, 'Learned veto on joining two '
          'touching regions: a pair more likely than this to be two objects stays apart '
          '(0: off; 0.7 as chosen on training worlds: more objects found under glare, but '
          'some single objects split; docs/worlds.md)', min=0.0, max=1.0),
    _pair('roi_x', [-0.194, 0.194], 'Tray interior along world x [min, max] (m)', tier='user'),
    _pair('roi_y', [-0.144, 0.144], 'Tray interior along world y [min, max] (m)', tier='user'),
)


def locator_params(params: dict[str, Any]) -> LocatorParams:
    """LocatorParams from the node parameters."""
    return LocatorParams(min_height=params['min_height'], color_step=params['color_step'],
                         hue_step=params['hue_step'], crease_deg=params['crease_deg'],
                         min_pixels=params['min_pixels'], split_pixels=params['split_pixels'],
                         merge_pair_veto=params['merge_pair_veto'],
                         roi_x=tuple(params['roi_x']),
                         roi_y=tuple(params['roi_y']))


def pose_of(obj: DetectedObject) -> Pose:
    """Pose of a detected object in world: centroid and yaw about z."""
    pose = Pose()
    pose.position.x, pose.position.y, pose.position.z = (float(v) for v in obj.position)
    q = yaw_to_quat(obj.yaw)
    pose.orientation.x, pose.orientation.y = float(q[0]), float(q[1])
    pose.orientation.z, pose.orientation.w = float(q[2]), float(q[3])
    return pose


def object_markers(objects: list[DetectedObject], target: int | None,
                   header: Header) -> MarkerArray:
    """One arrow (centroid, yaw) per object; the target in green, the others in orange."""
    out = MarkerArray(markers=[delete_all('objects', header)])
    for i, obj in enumerate(objects):
        m = Marker(header=header, ns='objects', id=i, type=Marker.ARROW, action=Marker.ADD,
                   pose=pose_of(obj))
        m.scale.x, m.scale.y, m.scale.z = 0.05, 0.008, 0.008
        m.color = (ColorRGBA(r=0.1, g=0.9, b=0.2, a=1.0) if i == target
                   else ColorRGBA(r=1.0, g=0.6, b=0.1, a=0.9))
        out.markers.append(m)
    return out


class ObjectLocatorNode(StageNode):
    """Lifecycle stage running the object locator on every frame."""

    PARAMS = GATE_PARAMS + LOCATOR_PARAMS + (
        Param('use_model', USE_MODEL_DEFAULT,
              'Fuse the segnet ONNX model (re-joins pieces it sees no contact between, fills '
              'depth holes; off by default, see USE_MODEL_DEFAULT)'),
        Param('device', 'cpu', 'Where the per-pixel part (height, foreground, colour/hue/depth '
              'cuts) runs: cpu, cuda, cuda:N or auto; the labelling and moments stay on the CPU '
              '(gated as object_locator.pixel_masks.cuda.float32; docs/placement.md)',
              check=device_error),
        Param('providers', '', 'ONNX Runtime execution providers for segnet (use_model), in '
              'priority order, comma-separated, e.g. "VitisAIExecutionProvider" for an NPU; '
              'empty: what device asks for. Each non-CPU provider needs its verified op '
              'segnet.ort.<provider>.float32', check=providers_error),
        Param('warmup_size', [640, 480], 'Camera size (width, height) whose GPU graph is '
              'captured at configure; a frame of another size captures its own on arrival '
              '(one slow frame). Ignored on the CPU', length=2, min=1, max=8192),
        Param('exposure_target', exposure.DEFAULT_TARGET,
              'A colour frame whose bright end (99th percentile of the brightest channel) is '
              'below this 8-bit level is brightened to it before the locator, at most '
              'exposure_max_gain: the colour rules keep their meaning in a dark room (0: off; '
              'edge_loop/kernels/exposure.py)', min=0.0, max=255.0),
        Param('exposure_max_gain', exposure.DEFAULT_MAX_GAIN,
              'Largest gain of exposure_target (noise grows with it)', min=1.0, max=64.0),
        Param('diagnostics_period_s', 1.0, 'Period of the /diagnostics summary (s)', min=0.1,
              max=60.0),
        Param('blind_warn_share', 0.02,
              'Summary goes WARN when a depth blind spot (glare) covers this share of the tray '
              'interior: objects there cannot be found (0 = never)', min=0.0, max=1.0),
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('object_locator', **kwargs)
        self._model: Any = None
        self._masks: Any = None
        self._gain = 1.0     # exposure gain of the last frame (diagnostics)
        self._labels: LabelWriter | None = None
        self._health: StageHealth | None = None
        self._pubs: dict[str, Any] = {}

    def configure_stage(self) -> None:
        """Gate, placement, parameters, publishers."""
        prm = self.params
        use_model = prm['use_model']
        check_deployable_or_fail(self, ['object_locator'] + (
            ['object_locator.fused', 'segnet.onnx'] if use_model else []))
        try:
            where = resolve_device(prm['device'])
        except PlacementError as exc:
            raise ConfigError(str(exc)) from exc
        self._ext = extrinsics_from(prm, self)
        self._lp = locator_params(prm)
        if use_model:
            self._model = self._load_model(where.device, prm['providers'])
        self._masks = None
        if where.is_accelerator:
            # torch only where a GPU is asked for: a CPU-only robot needs no torch
            from edge_loop.kernels.gpu.locator import LocatorMasks
            from edge_loop.kernels.gpu.transfer import CopyLedger

            check_deployable_or_fail(self, [GPU_OP_NAME])
            self._masks = LocatorMasks(where.device, ledger=CopyLedger())
            t0 = time.perf_counter()
            width, height = prm['warmup_size']
            self._masks.warm_up(nominal_intrinsics(width, height), self._ext, self._lp)
            self.get_logger().info(f'GPU graph for {width}x{height} frames captured in '
                                   f'{(time.perf_counter() - t0) * 1e3:.0f} ms')
        self.get_logger().info(f'per-pixel part on {where.device} ({where.reason})')
        self._frame_id = self.params['world_frame']
        self._pubs = {
            'objects': self.create_lifecycle_publisher(PoseArray, topics.OBJECTS, 10),
            'object': self.create_lifecycle_publisher(PoseStamped, topics.OBJECT, 10),
            'markers': self.create_lifecycle_publisher(MarkerArray, topics.MARKERS, 10),
        }
        self._labels = LabelWriter(self)
        self._health = StageHealth(self, 'object_locator')
        self._health.ledger = self._masks.ledger if self._masks is not None else None
        self._gain = 1.0
        self._health.extra = lambda: {'exposure_gain': f'{self._gain:.2f}'}
        self._warm_up()

    def _load_model(self, device: str, providers: str) -> Any:
        """The segnet session on the providers asked for, each gated; the CPU stays last."""
        from edge_loop.models.segnet import load_segnet

        try:
            chosen, ops, notes = gated_providers('segnet', device, providers)
        except PlacementError as exc:
            raise ConfigError(str(exc)) from exc
        for note in notes:
            self.get_logger().warning(f'providers: {note}')
        check_deployable_or_fail(self, ops)
        model = load_segnet(providers=tuple(chosen),
                            provider_options=tuple(ort_provider_options(chosen, device)))
        self.get_logger().info(f'segnet on {", ".join(model.providers)}')
        return model

    def _locate(self, color: Any, depth: Any, intr: Any) -> list[DetectedObject]:
        color, self._gain = exposure.normalise_exposure(
            color, self.params['exposure_target'], self.params['exposure_max_gain'])
        masks = None if self._masks is None else self._masks(color, depth, intr, self._ext,
                                                              self._lp)
        if self._model is not None:
            return locate_objects_fused(color, depth, intr, self._ext, self._lp,
                                        model=self._model, masks=masks)
        return locate_objects(color, depth, intr, self._ext, self._lp, masks=masks)

    def _warm_up(self) -> None:
        """Run the kernel once (the first ONNX run takes ~160 ms: not on a real frame)."""
        color, depth = warm_up_frame()
        t0 = time.perf_counter()
        ledger = self._masks.ledger if self._masks is not None else None
        self._locate(color, depth, D435_VGA)
        if ledger is not None:
            ledger.reset()
        self.get_logger().info(f'kernel warmed up in {(time.perf_counter() - t0) * 1e3:.0f} ms')

    def activate_stage(self) -> None:
        """Start reading frames."""
        self.open_frames(self._on_frame, lambda: self._health.summary(self.frame_reader))

    def deactivate_stage(self) -> None:
        """Stop reading frames."""
        self.close_frames()

    def release(self) -> None:
        """Close the reader, drop the model session, destroy the publishers (idempotent)."""
        self.close_frames()
        self._model = None
        self._masks = None
        labels, self._labels = self._labels, None
        if labels is not None:
            labels.close()
        for pub in self._pubs.values():
            self.destroy_publisher(pub)
        self._pubs = {}
        if self._health is not None:
            self.destroy_publisher(self._health.pub)
            self._health = None

    def _on_frame(self, frame: Any) -> None:
        health = self._health
        if health is None or not self._pubs:
            return
        t0 = time.perf_counter()
        try:
            color, depth, intr = frame_inputs(frame)
            health.audit(frame, color, depth)
            objects = self._locate(color, depth, intr)
        except (BadFrameError, ValueError) as exc:
            health.bad_frame(str(exc), frame.stamp)
            return
        order = rank_targets(objects, self._lp.tie_height)
        target = order[0] if order else None
        self.debug_delay()
        header = Header(stamp=frame.stamp, frame_id=self._frame_id)
        self._pubs['objects'].publish(PoseArray(header=header,
                                                poses=[pose_of(o) for o in objects]))
        # The segmentation under those poses, for the grasp planner (one perception pass).
        self._labels.write(label_image(objects, intr.height, intr.width), header)
        if target is not None:
            self._pubs['object'].publish(PoseStamped(header=header, pose=pose_of(objects[target])))
        self._pubs['markers'].publish(object_markers(objects, target, header))
        frame.mark('object_locator')
        health.processed((time.perf_counter() - t0) * 1e3)
        # After the answer is out (0.2 ms, ~1 ms with a blind spot): an empty or short list is
        # not an empty tray when the depth camera cannot see part of it.
        health.blind_spot(blind_spot_share(depth, intr, self._ext, self._lp),
                          self.params['blind_warn_share'])


def main(args: list[str] | None = None) -> int:
    """Run the object_locator node."""
    return run_node(ObjectLocatorNode, args)


if __name__ == '__main__':
    main()
