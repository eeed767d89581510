#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
#
# Build the folder bench/gpu_host_ros.sh installs from on a GPU host that has Python 3.12 with
# torch, numpy, OpenCV and ONNX Runtime but no ROS and no network (the lent H100/H200), on a
# machine with network and a python3.12:
#
#   bash bench/gpu_host_wheels.sh [.whl]    # PY312=/path/to/python3.12 if python3.12 is not on PATH
#
# It holds ros312.tar.xz (the ROS 2 Jazzy PyPI wheels of requirements-jazzy.txt installed with
# `pip install --prefix` for CPython 3.12, stripped of headers, CMake files, static libraries,
# tests and numpy; identical shared libraries stored once; the vendored launch wheels' data
# files, so the ament index finds launch's grammar), the package's other wheels (iceoryx2,
# rosbags and their dependencies) and the vendored launch wheels. About 16 MiB; the device
# takes 64 MiB with the checkout. Versions follow .venv-jazzy (make setup).
# iceoryx2 0.10 is published for glibc >= 2.34 only (manylinux_2_34).
set -euo pipefail
DEST=$(realpath -m "${1:-.whl}")
PY312=${PY312:-python3.12}
VENDOR=${VENDOR:-$(realpath -m ../shared/vendor/wheels)}
WORK=$(mktemp -d /tmp/gpu_host_wheels.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
"$PY312" -m venv "$WORK/v312"
"$WORK/v312/bin/pip" install -q --upgrade pip
.venv-jazzy/bin/pip freeze | grep -E '^ros-jazzy' \
  | sed 's/^ros-jazzy-rclpy==/ros-jazzy-rclpy[fastrtps]==/' > "$WORK/ros.txt"
.venv-jazzy/bin/pip freeze | grep -Ei '^(ros-|lark|pyyaml|empy|packaging|typing)' \
  > "$WORK/constraints.txt"
P="$WORK/stage/ros312"
"$WORK/v312/bin/pip" install -q --prefix "$P" -c "$WORK/constraints.txt" -r "$WORK/ros.txt"
SP="$P/lib/python3.12/site-packages"
rm -rf "$P/include" "$P/lib/cmake" "$P/lib64" "$P/bin" "$P/tools" "$P/lib/tracetools"
find "$P/share" -mindepth 2 -maxdepth 2 -type d -name cmake -exec rm -rf {} +
# what the GPU host has, or what only builds messages
rm -rf "$SP"/numpy "$SP"/numpy.libs "$SP"/numpy-*.dist-info "$SP"/setuptools \
  "$SP"/setuptools-*.dist-info "$SP"/_distutils_hack "$SP"/distutils-precedence.pth \
  "$SP"/em.py "$SP"/emdoc.py "$SP"/emhelp.py "$SP"/emlib.py "$SP"/empy-*.dist-info \
  "$SP"/lark-stubs "$SP"/ros_wheels_bootstrapper.pth
find "$P" -name '*.a' -delete
find "$P" -name __pycache__ -type d -prune -exec rm -rf {} +
find "$P" -type d \( -name test -o -name tests \) -prune -exec rm -rf {} +
# identical files (three copies of libfastrtps, libcrypto/libssl in each ros_*.libs): hard links
"$WORK/v312/bin/python" - "$P" <<'PY'
import hashlib, os, sys
seen = {}
for root, _, files in os.walk(sys.argv[1]):
    for f in sorted(files):
        p = os.path.join(root, f)
        if os.path.islink(p) or os.path.getsize(p) < 4096:
            continue
        with open(p, 'rb') as fh:
            h = hashlib.sha256(fh.read()).hexdigest()
        if h in seen:
            os.unlink(p)
            os.link(seen[h], p)
        else:
            seen[h] = p
PY
# launch finds its grammar through the ament index (AMENT_PREFIX_PATH = the ROS prefix)
mkdir -p "$WORK/launchdata"
for w in "$VENDOR"/*.whl; do unzip -q -o "$w" '*.data/data/*' -d "$WORK/launchdata" || true; done
for d in "$WORK"/launchdata/*.data/data; do cp -a "$d/." "$P/"; done
mkdir -p "$DEST"
tar --owner=0 --group=0 --sort=name -C "$WORK/stage" -cf - ros312 | xz -9e -T2 > "$DEST/ros312.tar.xz"
pins=$(.venv-jazzy/bin/pip freeze | grep -Ei '^(iceoryx2|flatbuffers|rosbags|apsw|backports[._-]zstd|lz4|ruamel[._-]yaml|osrf[._-]pycommon|packaging)==')
"$WORK/v312/bin/python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$DEST" $pins
cp "$VENDOR"/*.whl "$DEST"/
du -sh "$DEST"
