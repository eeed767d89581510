# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Items 8 and 9: the settings that matter for latency and discovery, and the versions.

Item 8 reads the settings from where they take effect: the running nodes' parameters
(``transport``, ``use_sim_time``, ``cpu_affinity``, ``nice``), the node processes' real CPU
sets and niceness, the environment the graph ran with (``ROS_DOMAIN_ID``, discovery range,
RMW, Fast DDS transports and profiles) and the CPU frequency governor in sysfs.
Item 9 reads the versions of what is installed and the package's git revision.
"""

from __future__ import annotations

import importlib
import importlib.metadata as metadata
import os
import platform
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from edge_loop.check.items import ItemResult, Status, not_run
from edge_loop.verify.host import installed_distribution

# Fast DDS settings that let large images cross plain topics (DESIGN.md; issue 33 item 8).
LARGE_DATA_ENV = ('FASTDDS_BUILTIN_TRANSPORTS',)
PROFILE_ENV = ('FASTDDS_DEFAULT_PROFILES_FILE', 'FASTRTPS_DEFAULT_PROFILES_FILE')
ENV_KEYS = ('ROS_DOMAIN_ID', 'ROS_AUTOMATIC_DISCOVERY_RANGE', 'ROS_STATIC_PEERS',
            'ROS_LOCALHOST_ONLY', 'RMW_IMPLEMENTATION', *LARGE_DATA_ENV, *PROFILE_ENV)


def cpu_governors(root: Path = Path('/sys/devices/system/cpu')) -> dict[str, str]:
    """{cpuN: scaling governor}; empty where cpufreq is not exposed (VMs, containers)."""
    out = {}
    for path in sorted(root.glob('cpu[0-9]*/cpufreq/scaling_governor')):
        try:
            out[path.parent.parent.name] = path.read_text().strip()
        except OSError:
            continue
    return out


def process_cpus(pid: int) -> tuple[frozenset[int] | None, int | None]:
    """(CPU set, niceness) of a running process (None where unreadable)."""
    try:
        cpus = frozenset(os.sched_getaffinity(pid))
    except OSError:
        cpus = None
    try:
        nice = os.getpriority(os.PRIO_PROCESS, pid)
    except OSError:
        nice = None
    return cpus, nice


def large_data_configured(env: Mapping[str, str]) -> str:
    """'' when Fast DDS is set up for large samples, else what is missing."""
    builtin = env.get('FASTDDS_BUILTIN_TRANSPORTS', '')
    if builtin.upper().startswith('LARGE_DATA'):
        return ''
    for key in PROFILE_ENV:
        path = env.get(key)
        if path and Path(path).is_file() and 'segment_size' in Path(path).read_text(
                errors='replace'):
            return ''
    return ('images cross plain topics with Fast DDS defaults: set FASTDDS_BUILTIN_TRANSPORTS='
            'LARGE_DATA or a profiles file with a shared-memory segment_size above a frame')


def judge_settings(node_params: Mapping[str, Mapping[str, Any]],
                   node_procs: Mapping[str, tuple[frozenset[int] | None, int | None]],
                   env: Mapping[str, str], governors: Mapping[str, str],
                   realtime_source: bool, unanswered: Sequence[str] = ()) -> ItemResult:
    """Item 8: transport, clock source, governor and pinning as they took effect.

    ``unanswered``: nodes whose parameters could not be read; their settings are unknown, so
    the item is NOT RUN rather than judged on the others alone.
    """
    from edge_loop.cpu import format_cpu_list, parse_cpu_list

    rows = []
    bad = []
    notes = []
    transports = {n: p.get('transport') for n, p in node_params.items() if 'transport' in p}
    over_topics = sorted(n for n, t in transports.items() if t == 'ros')
    rows.append(('frame transport', ', '.join(f'{n} {t}' for n, t in transports.items()),
                 'shm, or ros with large-data Fast DDS', ''))
    if over_topics:
        why = large_data_configured(env)
        rows[-1] = rows[-1][:3] + ('NO' if why else 'yes',)
        if why:
            bad.append(f'{", ".join(over_topics)} read frames over plain topics: {why}')
    else:
        rows[-1] = rows[-1][:3] + ('yes',)
    for key in ENV_KEYS:
        if key in env or key in ('ROS_DOMAIN_ID', 'ROS_AUTOMATIC_DISCOVERY_RANGE'):
            rows.append((key, env.get(key, '(unset: default)'), '-', 'yes'))
    domain = env.get('ROS_DOMAIN_ID', '0') or '0'
    scope = env.get('ROS_AUTOMATIC_DISCOVERY_RANGE', 'SUBNET') or 'SUBNET'
    if domain == '0' and scope.upper() != 'LOCALHOST':
        notes.append('domain 0 with subnet discovery: every ROS graph on the network sees '
                     'this one (set ROS_DOMAIN_ID per robot)')
    sim = sorted(n for n, p in node_params.items() if p.get('use_sim_time'))
    ok = not (realtime_source and sim)
    rows.append(('clock source', 'use_sim_time on ' + ', '.join(sim) if sim else
                 'system clock (use_sim_time false on every node)',
                 'system clock with a camera or real-time replay', 'yes' if ok else 'NO'))
    if not ok:
        bad.append(f'use_sim_time is true on {", ".join(sim)} with a real-time source')
    powersave = sorted(c for c, g in governors.items() if g == 'powersave')
    kinds = sorted(set(governors.values()))
    rows.append(('CPU governor', ', '.join(kinds) if kinds else 'not exposed (VM/container)',
                 'not powersave', 'NO' if powersave else 'yes'))
    if powersave:
        bad.append(f'CPU governor powersave on {", ".join(powersave)}: set performance')
    for name, params in node_params.items():
        want_text = params.get('cpu_affinity', '') or ''
        cpus, nice = node_procs.get(name, (None, None))
        if want_text:
            want = parse_cpu_list(want_text)
            ok = cpus == want
            rows.append((f'{name} pinning', f'cpus {format_cpu_list(cpus) if cpus else "?"}',
                         f'cpu_affinity {want_text}', 'yes' if ok else 'NO'))
            if not ok:
                bad.append(f'{name}: cpu_affinity {want_text} not in effect')
        want_nice = params.get('nice', 0)
        if want_nice and nice is not None and nice != want_nice:
            rows.append((f'{name} nice', str(nice), str(want_nice), 'NO'))
            bad.append(f'{name}: nice {want_nice} not in effect (runs at {nice}; '
                       'needs CAP_SYS_NICE)')
    pinned = sum(1 for p in node_params.values() if p.get('cpu_affinity'))
    measured = (f'frames over {"plain topics" if over_topics else "shared memory"}, domain '
                f'{domain} ({scope.lower()}), {"sim" if sim else "system"} clock, governor '
                f'{"/".join(kinds) or "n/a"}, {pinned} node(s) pinned')
    if notes:
        rows.append(('note', notes[0], '-', ''))
    if bad:
        return ItemResult(8, Status.FAIL, measured, 'settings in effect', rows=rows,
                          fix=bad[0])
    if unanswered:
        return not_run(8, f'{", ".join(unanswered)} did not answer get_parameters (is the '
                       'node spinning? ros2 param list /<node>)')
    return ItemResult(8, Status.PASS, measured, 'settings in effect', rows=rows)


# (label, import name, distribution names, required)
PACKAGES = (
    ('ROS 2 (rclpy)', 'rclpy', ('ros-jazzy-rclpy', 'ros-kilted-rclpy', 'rclpy'), True),
    ('numpy', 'numpy', ('numpy',), True),
    ('onnxruntime', 'onnxruntime', ('onnxruntime', 'onnxruntime-gpu'), True),
    ('opencv', 'cv2', ('opencv-python-headless', 'opencv-python'), True),
    ('iceoryx2', 'iceoryx2', ('iceoryx2',), True),
    ('torch', 'torch', ('torch',), False),
)


def git_revision(root: Path) -> str:
    """Short revision of ``root``'s checkout, '+dirty' when tracked files differ."""
    try:
        rev = subprocess.run(['git', '-C', str(root), 'rev-parse', '--short', 'HEAD'],
                             capture_output=True, text=True, timeout=10, check=True)
        dirty = subprocess.run(['git', '-C', str(root), 'status', '--porcelain',
                                '--untracked-files=no'], capture_output=True, text=True,
                               timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ''
    return rev.stdout.strip() + ('+dirty' if dirty.stdout.strip() else '')


def collect_versions(root: Path, import_torch: bool = False) -> dict[str, str]:
    """{label: version or 'missing: why'} of Python, the packages and the git revision.

    torch is large: its version comes from the installed distribution unless
    ``import_torch``.
    """
    out = {'Python': f'{platform.python_version()} ({sys.executable})'}
    for label, module, dists, _ in PACKAGES:
        dist = installed_distribution(dists)
        if module == 'torch' and not import_torch:
            out[label] = dist[1] if dist else 'not installed'
            continue
        try:
            mod = importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - any import failure is 'missing'
            out[label] = f'missing: {type(exc).__name__}: {exc}'
            continue
        version = getattr(mod, '__version__', None) or (dist[1] if dist else '?')
        if module == 'rclpy' and dist:
            version = f'{dist[1]} ({dist[0]})'
        out[label] = str(version)
    try:
        package = metadata.version('edge_loop')
    except metadata.PackageNotFoundError:
        package = '?'
    out['edge_loop'] = f'{package}, git {git_revision(root) or "(not a git checkout)"}'
    return out


def judge_versions(versions: Mapping[str, str]) -> ItemResult:
    """Item 9: every required package present; the versions are the page's record."""
    rows = []
    missing = []
    required = {label: req for label, _, _, req in PACKAGES}
    for label, version in versions.items():
        ok = not version.startswith('missing') or not required.get(label, False)
        rows.append((label, version, 'installed' if required.get(label) else '-',
                     'yes' if ok else 'NO'))
        if not ok:
            missing.append(label)
    short = ', '.join(f'{k} {v.split(" ")[0]}' for k, v in versions.items()
                      if not v.startswith('missing'))
    if missing:
        return ItemResult(9, Status.FAIL, short, 'required packages installed', rows=rows,
                          fix=f'{", ".join(missing)} missing: make setup (or pip install -r '
                          'requirements.txt)')
    return ItemResult(9, Status.PASS, short, 'required packages installed', rows=rows)
