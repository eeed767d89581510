# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
#
# Source this on a GPU host that has Python 3.12 with torch but no ROS and no network (the lent
# H200): it installs the ROS 2 Jazzy PyPI wheels and the package's other wheels from a folder
# carried along, and sets the environment the nodes need.
#
#   WHEELS=.whl . bench/gpu_host_ros.sh
#
# WHEELS holds: ros312.tar.xz (the ROS wheels for cp312 installed with `pip install --prefix`,
# headers and CMake files stripped: see docs/placement.md), iceoryx2, rosbags and its
# dependencies, osrf-pycommon and the vendored launch wheels (../shared/vendor/wheels).
WHEELS=${WHEELS:-.whl}
ROS_PREFIX=${ROS_PREFIX:-/tmp/ros312}
SITE=${SITE:-/tmp/site312}
mkdir -p "$ROS_PREFIX" "$SITE"
tar xJf "$WHEELS/ros312.tar.xz" -C "$ROS_PREFIX" --strip-components=1 || return 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" \
  "$WHEELS"/*.whl || return 1
ROS_SITE="$ROS_PREFIX/lib/python3.12/site-packages"
# what the ros_wheels_bootstrapper .pth would do in a venv: the wheels' bundled libraries
LD_LIBRARY_PATH="$(ls -d "$ROS_SITE"/ros_*.libs | tr '\n' ':')$ROS_PREFIX/lib:${LD_LIBRARY_PATH:-}"
export LD_LIBRARY_PATH
export _ROS_WHEELS_BOOTSTRAP_COMPLETE=1
export AMENT_PREFIX_PATH="$ROS_PREFIX"
export PYTHONPATH="$PWD:$ROS_SITE:$SITE:${PYTHONPATH:-}"
export PATH="$SITE/bin:$PATH"
export ROS_LOG_DIR=${ROS_LOG_DIR:-/tmp/ros_log}
