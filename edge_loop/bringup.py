# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The one description of the node graph: executables, order, parameters, remaps.

``edge-loop up`` (edge_loop/launcher.py) starts it as processes here; launch/pick.launch.py
turns the same list into launch_ros LifecycleNode actions on robots that have launch.
The list order is the bring-up order; shutdown walks it backwards (as Nav2's manager does).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edge_loop import stages, topics
from edge_loop.paths import config_path

PACKAGE = 'edge_loop'
SOURCES = ('sim', 'bag', 'driver')
TRANSPORTS = ('shm', 'ros')
STAGES = stages.NAMES   # the stage table (edge_loop/stages.py) gives names, topics, budgets


@dataclass(frozen=True)
class NodeSpec:
    """One node of the graph, as launch_ros would describe it."""

    name: str
    executable: str
    parameters: dict[str, Any] = field(default_factory=dict)
    remappings: tuple[tuple[str, str], ...] = ()
    lifecycle: bool = True
    managed: bool = True      # brought up by the lifecycle manager
    namespace: str = ''       # '' or absolute ('/robot1')
    log_level: str = ''       # rcl log level ('' = default)

    def ros_args(self, params_file: Path | list[Path] | None,
                 overrides_dir: Path | None = None) -> list[str]:
        """Command-line ROS arguments for this node (what launch_ros would pass).

        With ``overrides_dir`` the per-node parameters go into a second params file under the
        node's name, read after ``params_file``: rcl stores ``-p`` overrides under ``/**``,
        where they lose to a key in the node's own section of the first file.
        """
        args = ['--ros-args', '-r', f'__node:={self.name}']
        if self.namespace:
            args += ['-r', f'__ns:={self.namespace}']
        if self.log_level:
            args += ['--log-level', self.log_level]
        files = params_file if isinstance(params_file, (list, tuple)) else (
            [] if params_file is None else [params_file])
        for path in files:   # later files win, as launch_ros layers them
            args += ['--params-file', str(path)]
        if overrides_dir is not None and self.parameters:
            import yaml

            overrides_dir.mkdir(parents=True, exist_ok=True)
            path = overrides_dir / f'{self.name}.params.yaml'
            key = f'{self.namespace}/{self.name}' if self.namespace else self.name
            path.write_text(yaml.safe_dump({key: {'ros__parameters': dict(
                (k, list(v) if isinstance(v, tuple) else v)
                for k, v in self.parameters.items())}}))
            args += ['--params-file', str(path)]
        else:
            for key, value in self.parameters.items():
                args += ['-p', f'{key}:={_param_literal(value)}']
        for src, dst in self.remappings:
            args += ['-r', f'{src}:={dst}']
        return args


def _param_literal(value: Any) -> str:
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, (list, tuple)):
        return '[' + ','.join(_param_literal(v) for v in value) + ']'
    if isinstance(value, str):
        return f"'{value}'"
    return repr(value)


def default_params_file() -> Path:
    """config/pick.yaml from the installed share directory or the source tree."""
    return config_path('pick.yaml')


# Settings the graph needs to work, per source: they live here so that ``edge-loop demo``,
# ``edge-loop up`` and pick.launch.py cannot disagree. The simulator renders ~140 ms of CPU a
# frame, so it runs on simulated time in lock-step with the controller: the deadline monitor
# then judges the loop's own compute, not the renderer's.
SOURCE_SETTINGS: dict[str, dict[str, dict[str, Any]]] = {
    'sim': {'sim_robot': {'lockstep': True}},
    'bag': {},
    'driver': {},
}
CONTRACT_TOPICS = (
    topics.OBJECT, topics.OBJECTS, topics.GRASP, topics.GRASP_ALTERNATIVES, topics.OCCUPANCY,
    topics.GRASP_STATE, topics.ARM_CMD, topics.GRIPPER_CMD, topics.MARKERS, topics.FRAMES,
    topics.SAFE_STOP, topics.JOINT_STATES, topics.TCP_POSE, topics.SIM_OBJECTS,
    topics.SIM_MASK, topics.SIM_OCCUPANCY, topics.SIM_GRASP_OUTCOME)
DEFAULT_CAMERA_NS = 'camera'
# realsense-ros 4.x publishes under /<camera_namespace>/<camera_name>/: /camera/camera/...
REALSENSE_CAMERA_NS = '/camera/camera'


@dataclass(frozen=True)
class Replay:
    """How bag_player replays a bag (the ``ros2 bag play`` options a ROS user expects).

    ``clock`` False: header stamps are rewritten to the replay time (now - stamp is a real
    latency; the nodes stay on the system clock). True: stamps go out as recorded and
    bag_player publishes /clock from the bag's receive times; every node runs on sim time.
    """

    loop: bool = False
    rate: float = 1.0
    start_paused: bool = False
    clock: bool = False

    def parameters(self) -> dict[str, Any]:
        """bag_player parameters for this replay."""
        return {'loop': self.loop, 'rate': self.rate, 'start_paused': self.start_paused,
                'restamp': not self.clock, 'publish_clock': self.clock,
                'wait_for_manager': 'lifecycle_manager'}


def graph(source: str = 'sim', *, bag: str | None = None, transport: str = 'shm',
          use_sim_time: bool | None = None, stages: tuple[str, ...] = STAGES,
          monitor: bool = True, extra: dict[str, dict[str, Any]] | None = None,
          namespace: str = '', camera_ns: str = DEFAULT_CAMERA_NS, replay: Replay | None = None,
          use_model: bool | None = None, device: str = '', log_level: str = '',
          ) -> list[NodeSpec]:
    """Return the nodes of the pick loop in bring-up order.

    Args:
        source: where the camera and gripper come from: ``sim`` (sim_robot), ``bag``
            (bag_player replaying ``bag``) or ``driver`` (a real camera driver; frame_ingest
            copies its images into shared memory once).
        bag: rosbag2 folder for ``source='bag'``.
        transport: ``shm`` (iceoryx2 loans) or ``ros`` (plain Image topics).
        use_sim_time: run on /clock; defaults to True with the simulator and with a bag
            replayed on its own clock (``replay.clock``).
        stages: which processing stages to start (a subset for tests and partial graphs).
        monitor: start the deadline monitor.
        extra: per-node parameter overrides {node_name: {param: value}}.
        namespace: push every node and topic (but /diagnostics, /clock, /tf) under it.
        camera_ns: where the camera topics are (``camera``: camera/color/image_raw, ...;
            realsense-ros 4.x: ``/camera/camera``); relative names follow ``namespace``.
        replay: bag replay options (default: restamped, once, real time).
        use_model: object_locator fuses the shipped segmentation model (None: its default).
        device: torch/ONNX device for the nodes that declare a ``device`` parameter.
        log_level: rcl log level of every node ('' leaves the default).

    """
    if source not in SOURCES:
        raise ValueError(f'source {source!r} not one of {", ".join(SOURCES)}')
    if transport not in TRANSPORTS:
        raise ValueError(f'transport {transport!r} not one of {", ".join(TRANSPORTS)}')
    if source == 'bag' and not bag:
        raise ValueError("source 'bag' needs a bag path")
    unknown = set(stages) - set(STAGES)
    if unknown:
        raise ValueError(f'unknown stage(s) {sorted(unknown)}; known: {", ".join(STAGES)}')
    if log_level and log_level.lower() not in LOG_LEVELS:
        raise ValueError(f'log_level {log_level!r} not one of {", ".join(LOG_LEVELS)}')
    namespace = normalize_namespace(namespace)
    replay = replay or Replay()
    if use_sim_time is None:
        use_sim_time = source == 'sim' or (source == 'bag' and replay.clock)
    common: dict[str, Any] = {'transport': transport, 'use_sim_time': use_sim_time}
    if namespace:
        # Two namespaced graphs on one host must not share the frames' shared memory.
        common['frame_channel'] = namespace.strip('/').replace('/', '_') + '/edge_loop/rgbd'
    settings: dict[str, dict[str, Any]] = {k: dict(v) for k, v in SOURCE_SETTINGS[source].items()}
    if source == 'bag':
        settings['bag_player'] = {'bag': str(bag), **replay.parameters()}
    if use_model is not None:
        settings.setdefault('object_locator', {})['use_model'] = bool(use_model)
    remaps = topic_remappings(namespace, camera_ns)
    extra = extra or {}

    def spec(name: str) -> NodeSpec:
        params = {**common, **settings.get(name, {})}
        if device and 'device' in declared_parameters(name):
            params['device'] = device
        params.update(extra.get(name, {}))
        return NodeSpec(name=name, executable=name, parameters=params, remappings=remaps,
                        namespace=namespace, log_level=log_level.lower())

    nodes: list[NodeSpec] = []
    if source == 'sim':
        nodes.append(spec('sim_robot'))
    elif source == 'bag':
        nodes.append(spec('bag_player'))
    elif transport == 'shm':
        nodes.append(spec('frame_ingest'))
    nodes += [spec(s) for s in STAGES if s in stages]
    if monitor:
        nodes.append(spec('deadline_monitor'))
    return nodes


LOG_LEVELS = ('debug', 'info', 'warn', 'error', 'fatal')


def normalize_namespace(namespace: str) -> str:
    """'' or an absolute namespace without a trailing slash ('robot1' -> '/robot1')."""
    namespace = (namespace or '').strip().strip('/')
    if not namespace:
        return ''
    for part in namespace.split('/'):
        if not part or not (part[0].isalpha() or part[0] == '_') or not all(
                c.isalnum() or c == '_' for c in part):
            raise ValueError(f'namespace {namespace!r} is not a valid ROS namespace')
    return '/' + namespace


def topic_remappings(namespace: str, camera_ns: str = DEFAULT_CAMERA_NS
                     ) -> tuple[tuple[str, str], ...]:
    """Remaps that put the loop's topics under ``namespace`` and the camera at ``camera_ns``.

    The nodes name their topics as the contract writes them (/edge_loop/grasp, ...); a rule
    ``/edge_loop/grasp:=edge_loop/grasp`` makes rcl resolve the name in the node's namespace,
    so one list serves every node. /diagnostics, /clock and /tf stay global, as in ROS.
    """
    remaps: list[tuple[str, str]] = []
    if namespace:
        remaps += [(name, name.lstrip('/')) for name in CONTRACT_TOPICS]
    camera_ns = (camera_ns or DEFAULT_CAMERA_NS).rstrip('/')
    if namespace or camera_ns not in (DEFAULT_CAMERA_NS, '/' + DEFAULT_CAMERA_NS):
        prefix = '/' + DEFAULT_CAMERA_NS
        remaps += [(name, camera_ns + name[len(prefix):]) for name in topics.CAMERA_INPUTS]
    return tuple(remaps)


def declared_parameters(executable: str) -> set[str]:
    """Names of the parameters the node ``executable`` declares (imports its module)."""
    import importlib
    import inspect

    module = importlib.import_module(f'edge_loop.nodes.{executable}')
    names: set[str] = set()
    for _, cls in inspect.getmembers(module, inspect.isclass):
        if cls.__module__ == module.__name__ and hasattr(cls, 'all_params'):
            names.update(p.name for p in cls.all_params())
    return names


def namespaced_params_file(path: Path, namespace: str, out_dir: Path) -> Path:
    """``path`` with each node section keyed by its namespaced name (``/ns/node``).

    rcl matches a params file's node keys against the fully qualified node name, so the
    shipped file's ``object_locator:`` would not reach ``/robot1/object_locator``; ``/**``
    sections (and keys already absolute or wildcarded) are kept as they are.
    """
    import yaml

    if not namespace:
        return Path(path)
    data = yaml.safe_load(Path(path).read_text()) or {}
    renamed = {(key if str(key).startswith('/') else f'{namespace}/{key}'): value
               for key, value in data.items()}
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f'{namespace.strip("/").replace("/", "_")}.{Path(path).name}'
    out.write_text(yaml.safe_dump(renamed, sort_keys=False))
    return out


def managed_node_names(nodes: list[NodeSpec]) -> list[str]:
    """Names the lifecycle manager brings up, in order."""
    return [n.name for n in nodes if n.lifecycle and n.managed]


def manager_spec(nodes: list[NodeSpec], **params: Any) -> NodeSpec:
    """The lifecycle manager for ``nodes`` (itself a plain node, started last)."""
    use_sim_time = any(n.parameters.get('use_sim_time') for n in nodes)
    first = nodes[0] if nodes else NodeSpec('', '')
    return NodeSpec(name='lifecycle_manager', executable='lifecycle_manager',
                    parameters={'node_names': managed_node_names(nodes),
                                'use_sim_time': use_sim_time, **params},
                    remappings=first.remappings, lifecycle=False, managed=False,
                    namespace=first.namespace, log_level=first.log_level)


# camera_link (REP 103 body: x forward, y left, z up) -> camera_color_optical_frame (z forward,
# x right, y down): the fixed rotation every ROS camera driver publishes, [qx, qy, qz, qw].
LINK_TO_OPTICAL = (-0.5, 0.5, -0.5, 0.5)
CAMERA_LINK = 'camera_link'
OPTICAL_FRAME = 'camera_color_optical_frame'
EXTRINSICS_SOURCES = ('params', 'tf')


@dataclass(frozen=True)
class StaticTransform:
    """One tf2_ros static_transform_publisher: parent -> child, translation, [qx, qy, qz, qw]."""

    parent: str
    child: str
    translation: tuple[float, float, float]
    rotation: tuple[float, float, float, float]

    def arguments(self) -> list[str]:
        """static_transform_publisher's command line (the Jazzy flag form)."""
        x, y, z = self.translation
        qx, qy, qz, qw = self.rotation
        return ['--x', repr(x), '--y', repr(y), '--z', repr(z), '--qx', repr(qx),
                '--qy', repr(qy), '--qz', repr(qz), '--qw', repr(qw),
                '--frame-id', self.parent, '--child-frame-id', self.child]


def shared_parameters(params_files: list[Path]) -> dict[str, Any]:
    """The ``/**`` parameters of the params files, later files winning (as rcl layers them)."""
    import yaml

    merged: dict[str, Any] = {}
    for path in params_files:
        data = yaml.safe_load(Path(path).read_text()) or {}
        merged.update((data.get('/**') or {}).get('ros__parameters') or {})
    return merged


def camera_transforms(params_files: list[Path]) -> list[StaticTransform]:
    """The transforms world -> camera_link -> camera_color_optical_frame from the extrinsics.

    The nodes take the optical frame's pose in world from ``camera_position`` and
    ``camera_orientation`` (the ``/**`` section); TF gets the same pose, split at camera_link
    so that RViz and robot tools see the REP 103 body frame. camera_link sits at the optical
    centre (the lens offset of a real D435 is the driver's to publish when it owns TF).
    """
    shared = shared_parameters(params_files)
    position = tuple(float(v) for v in shared.get('camera_position', (0.0, 0.0, 0.75)))
    orientation = tuple(float(v) for v in shared.get('camera_orientation', (1.0, 0.0, 0.0, 0.0)))
    world = str(shared.get('world_frame', 'world'))
    if len(position) != 3 or len(orientation) != 4:
        raise ValueError('camera_position needs 3 values and camera_orientation 4')
    world_to_link = quaternion_multiply(_normalized(orientation),
                                        quaternion_conjugate(LINK_TO_OPTICAL))
    return [StaticTransform(world, CAMERA_LINK, position, world_to_link),
            StaticTransform(CAMERA_LINK, OPTICAL_FRAME, (0.0, 0.0, 0.0), LINK_TO_OPTICAL)]


def _normalized(q: tuple[float, ...]) -> tuple[float, float, float, float]:
    norm = sum(v * v for v in q) ** 0.5
    if norm < 1e-9:
        raise ValueError('camera_orientation has zero norm')
    return tuple(v / norm for v in q)  # type: ignore[return-value]


def quaternion_conjugate(q: tuple[float, ...]) -> tuple[float, float, float, float]:
    """Inverse of a unit quaternion [qx, qy, qz, qw]."""
    return (-q[0], -q[1], -q[2], q[3])


def quaternion_multiply(a: tuple[float, ...], b: tuple[float, ...]
                        ) -> tuple[float, float, float, float]:
    """Hamilton product a * b of [qx, qy, qz, qw] quaternions (rotation b, then a)."""
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return (aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz)


# Launch arguments (name, default, description): pick.launch.py declares exactly these and
# ``edge-loop up`` takes the same names, so both build the graph through :func:`from_arguments`.
LAUNCH_ARGUMENTS = (
    ('use_sim', 'true', 'run against the pybullet sim_robot (ignored with bag:=)'),
    ('bag', '', 'replay this rosbag2 folder instead of the simulator or a driver'),
    ('loop', 'false', 'bag: start again at the end'),
    ('rate', '1.0', 'bag: playback speed factor'),
    ('start_paused', 'false', 'bag: wait for bag_player/resume before playing'),
    ('bag_clock', 'false', 'bag: publish /clock from the bag and run every node on it '
     '(default: restamp headers to the current clock)'),
    ('use_sim_time', '', "run every node on /clock ('' = the source decides: sim and "
     'bag_clock yes, otherwise no)'),
    ('namespace', '', 'namespace of every node and topic (/diagnostics, /clock, /tf stay global)'),
    ('camera_ns', DEFAULT_CAMERA_NS, 'namespace of the camera topics (realsense-ros 4.x: '
     f'{REALSENSE_CAMERA_NS})'),
    ('transport', 'shm', 'shm (iceoryx2 loans) or ros (Image topics)'),
    ('params_file', '', 'ROS params file layered over the shipped config/pick.yaml'),
    ('log_level', 'info', 'log level of every node: ' + ', '.join(LOG_LEVELS)),
    ('use_model', '', "object_locator fuses the shipped segmentation model (true/false; '' "
     'leaves the parameter files to decide)'),
    ('device', '', 'compute device for the nodes that declare a device parameter'),
    ('extrinsics_source', 'params', 'params: publish the camera in TF from camera_position/'
     'camera_orientation; tf: the robot already publishes it, and the nodes read the camera '
     'pose from TF at configure (needs tf2_ros)'),
    ('rviz', 'false', 'start RViz with rviz/pick.rviz'),
)


def truthy(text: str) -> bool:
    """A launch argument's boolean value (true/false, 1/0, yes/no, on/off)."""
    value = str(text).strip().lower()
    if value in ('1', 'true', 'yes', 'on'):
        return True
    if value in ('0', 'false', 'no', 'off', ''):
        return False
    raise ValueError(f'{text!r} is not a boolean')


@dataclass
class LaunchPlan:
    """Everything a launch needs: nodes, manager, params files (in order) and TF."""

    nodes: list[NodeSpec]
    manager: NodeSpec
    params_files: list[Path]
    transforms: list[StaticTransform]
    namespace: str
    use_sim_time: bool


def from_arguments(arguments: dict[str, str], work_dir: Path,
                   extra: dict[str, dict[str, Any]] | None = None, **graph_kwargs: Any
                   ) -> LaunchPlan:
    """Build the graph from launch-argument strings (missing ones take their defaults).

    ``work_dir`` receives the namespaced copies of the params files. Raises ValueError with
    the argument's name for a bad value.
    """
    args = {name: default for name, default, _ in LAUNCH_ARGUMENTS}
    unknown = set(arguments) - set(args)
    if unknown:
        raise ValueError(f'unknown launch argument(s) {sorted(unknown)}')
    args.update({k: str(v) for k, v in arguments.items()})

    def flag(name: str) -> bool:
        try:
            return truthy(args[name])
        except ValueError:
            raise ValueError(f'{name}:={args[name]!r} is not a boolean') from None

    try:
        rate = float(args['rate'])
    except ValueError:
        raise ValueError(f"rate:={args['rate']!r} is not a number") from None
    if not 0.01 <= rate <= 100.0:
        raise ValueError(f'rate:={rate:g} is outside [0.01, 100]')
    if args['extrinsics_source'] not in EXTRINSICS_SOURCES:
        raise ValueError(f"extrinsics_source:={args['extrinsics_source']!r} not one of "
                         f'{", ".join(EXTRINSICS_SOURCES)}')
    source = 'bag' if args['bag'] else ('sim' if flag('use_sim') else 'driver')
    replay = Replay(loop=flag('loop'), rate=rate, start_paused=flag('start_paused'),
                    clock=flag('bag_clock'))
    namespace = normalize_namespace(args['namespace'])
    nodes = graph(source, bag=args['bag'] or None, transport=args['transport'],
                  use_sim_time=flag('use_sim_time') if args['use_sim_time'] else None,
                  extra=extra, namespace=namespace, camera_ns=args['camera_ns'],
                  replay=replay, use_model=flag('use_model') if args['use_model'] else None,
                  device=args['device'],
                  log_level=args['log_level'], **graph_kwargs)
    if args['extrinsics_source'] == 'tf':   # the nodes read the camera pose from TF, not params
        for node in nodes:
            node.parameters['extrinsics_source'] = 'tf'
    files = [default_params_file()]
    if args['params_file']:
        user = Path(args['params_file']).expanduser()
        if not user.is_file():
            raise ValueError(f'params_file:={user} is not a file')
        files.append(user)
    transforms = (camera_transforms(files) if args['extrinsics_source'] == 'params' else [])
    files = [namespaced_params_file(f, namespace, work_dir) for f in files]
    manager = manager_spec(nodes, autostart=True)
    return LaunchPlan(nodes, manager, files, transforms, namespace,
                      bool(manager.parameters['use_sim_time']))
