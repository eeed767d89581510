# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
#
# Two commands for a newcomer on a fresh Debian 12 / Ubuntu 24.04 machine without ROS:
#   make demo   set up (venv + ROS 2 wheels) and run the closed-loop pick
#   make test   set up and run every test
ROS_DISTRO ?= jazzy
# The ROS wheels exist for CPython 3.11 and 3.12.
PYTHON ?= $(shell for p in python3.11 python3.12 python3; do command -v $$p >/dev/null 2>&1 && { echo $$p; break; }; done)
VENV ?= .venv-$(ROS_DISTRO)
PY := $(VENV)/bin/python
STAMP := $(VENV)/.edge_loop-installed
# The vendored ROS 2 launch stack (wheels); ../shared sits beside the checkout.
LAUNCH_WHEELS ?= $(CURDIR)/../shared/vendor/wheels
PYTEST_ARGS ?=
DEMO_ARGS ?=
export ROS_LOG_DIR ?= $(CURDIR)/log/ros
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: setup test-robot-deps demo test test-ros verify check bench bench-transport bench-sim bench-vision bench-deadline \
	bench-occupancy bench-grasp-state bench-perception bench-pick-kernel bench-pick bench-replay train lint clean \
	record-default bench-worlds

setup: $(STAMP)

$(STAMP): requirements.txt requirements-$(ROS_DISTRO).txt setup.py package.xml
	@test -n "$(PYTHON)" || { echo "error: need python3.11 or python3.12 (apt-get install python3 python3-venv)"; exit 1; }
	@$(PYTHON) -c 'import venv, ensurepip' 2>/dev/null || { \
	  echo "python3-venv is missing; installing it with apt-get"; \
	  (command -v sudo >/dev/null && [ "$$(id -u)" != 0 ] && SUDO=sudo; \
	   $$SUDO apt-get update -q && $$SUDO apt-get install -y -q python3-venv) ; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-$(ROS_DISTRO).txt -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	@# ROS 2 launch, launch_ros, launch_testing and launch_pytest are not on PyPI: the Jazzy
	@# wheels vendored beside the checkout (../shared/vendor/README.md) run the launch tests.
	@# Without them those tests skip, which .ci/run refuses.
	@if [ -d "$(LAUNCH_WHEELS)" ]; then \
	  $(PY) -m pip install -q --no-index --find-links "$(LAUNCH_WHEELS)" \
	    launch launch_ros launch_testing launch_pytest launch_testing_ros; \
	else echo "note: $(LAUNCH_WHEELS) not found: the launch tests (test/launch) will skip"; fi
	@touch $@

# The robot's Python packages (Ubuntu 24.04 + apt Jazzy: numpy 1.26, OpenCV 4.6, pinned by
# constraints-robot.txt, installed as docs/robot_install.md says): the kernel unit tests in a
# venv without ROS. CI runs it after the Jazzy leg. The 3840x2160 sweep cases are left to the
# main leg and `make verify` (about two minutes of reference time on 2 cores).
ROBOT_VENV ?= .venv-robot-deps
test-robot-deps:
	@test -x $(ROBOT_VENV)/bin/python || $(PYTHON) -m venv $(ROBOT_VENV)
	$(ROBOT_VENV)/bin/python -m pip install -q -r requirements-robot.txt -c constraints-robot.txt \
	  numpy opencv-python-headless pyyaml 'pytest==8.3.5' pytest-timeout
	$(ROBOT_VENV)/bin/python -c 'import numpy, cv2; print("numpy", numpy.__version__, "OpenCV", cv2.__version__); \
	  assert numpy.__version__.startswith("1.26") and cv2.__version__.startswith("4.6"), "not the robot versions"'
	PYTHONPATH=$(CURDIR) $(ROBOT_VENV)/bin/python -m pytest test/kernels -p no:cacheprovider \
	  --ignore=test/kernels/test_deadline.py \
	  -k 'not 3840x2160' $(PYTEST_ARGS)

demo: setup
	$(VENV)/bin/edge-loop demo $(DEMO_ARGS)

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

# ROS integration tests only (ROS_MARK='ros and not slow' leaves out the full-graph ones; CI
# runs ROS_MARK=every_distro against Kilted).
ROS_MARK ?= ros
test-ros: setup
	$(PY) -m pytest -m "$(ROS_MARK)" $(PYTEST_ARGS)

# Verification gates and report (reports/verify/index.md, .html); VERIFY_ARGS=--quick for
# the short form, --ops NAME... to select (docs/verification.md).
VERIFY_ARGS ?=
verify: setup
	$(VENV)/bin/edge-loop verify $(VERIFY_ARGS)

# The deployment checklist on this host (docs/check.md); exit code 0 only when every required
# item passes. On a machine that is not the target: CHECK_ARGS="--quick --calibrate".
CHECK_ARGS ?=
check: setup
	$(VENV)/bin/edge-loop check $(CHECK_ARGS)

lint: setup
	$(PY) -m ruff check edge_loop test bench tools launch setup.py

bench: bench-transport bench-sim bench-vision bench-deadline bench-occupancy bench-grasp-state \
	bench-perception bench-replay bench-pick-kernel bench-pick

bench-transport: setup
	$(PY) bench/bench_transport.py

bench-sim: setup
	$(PY) bench/bench_sim.py

bench-vision: setup
	$(PY) bench/bench_vision.py

bench-deadline: setup
	$(PY) bench/bench_deadline.py

bench-occupancy: setup
	$(PY) bench/bench_occupancy.py

bench-grasp-state: setup
	$(PY) bench/bench_grasp_state.py

# Per-frame CPU of perception: the locator once (now) against twice (before), side by side.
bench-perception: setup
	$(PY) bench/bench_perception_pass.py

# Real-time replay of the nominal scenario bag through the whole graph: end-to-end latency
# and deadline misses, shipped process priorities vs all at nice 0 (about 10 min).
bench-replay: setup
	$(PY) bench/bench_replay.py --seconds 90 --rounds 3

# 100 closed-loop picks with the kernels and the physics, no ROS (about 6 min a core).
bench-pick-kernel: setup
	$(PY) -m edge_loop.pick_episode --episodes 100

# 100 closed-loop picks through the whole ROS graph (long: about 15 s per pick here).
bench-pick: setup
	$(VENV)/bin/edge-loop demo --episodes 100 --report reports/bench-pick

# Training needs torch (CPU build); only the exported ONNX files are shipped.
train: setup
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m edge_loop.models.train

record-default: setup
	$(VENV)/bin/edge-loop record --default --force --output data/scenarios

clean:
	rm -rf .venv-* build install log reports .pytest_cache

# Randomised worlds (issue 34): the locator + planner on held-out world configurations and
# objects, the training worlds and the shipped world; Markdown + JSON in bench/results/worlds/
# (docs/worlds.md). About 20 min on 2 cores. BENCH_WORLDS_ARGS="--heldout 60 --train 20".
BENCH_WORLDS_ARGS ?=
bench-worlds: setup
	$(PY) bench/bench_worlds.py $(BENCH_WORLDS_ARGS)

# edge-loop regress at scale (docs/fleet.md): 1,000 short bags serial vs a local Ray cluster
# (alternated pairs), and a simulated 4-node cluster; results in bench/results/fleet/.
.PHONY: bench-fleet
bench-fleet: setup
	$(PY) bench/bench_fleet.py
