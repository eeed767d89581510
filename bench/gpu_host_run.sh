#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
#
# Issue 31's runs on a GPU host, in one go, results under OUT (docs/placement.md):
#   1. bench/placement_step.py: the GPU-placed stages as one step vs the deployed CPU kernels,
#      side by side (graphed, and compiled + graphed);
#   2. edge-loop verify of every GPU op and of the CPU ops the graph's nodes gate (so the nodes
#      configure on this host: a verification is per library versions);
#   3. the node graph replaying a bag (edge-loop demo --bag), once with the default placement
#      and once with --device cuda: per-stage latency, deadline misses, copies and
#      host<->device transfers per frame.
#
#   4. (tests) the GPU kernel tests on the device (test/kernels/test_gpu_kernels.py).
#
#   WHEELS=.whl OUT=/tmp/out bash bench/gpu_host_run.sh       (.whl: bench/gpu_host_wheels.sh)
#   STEPS="tests verify demo" ... runs only those steps (default: all four)
#   PASSES=15 ... the demo replays each bag 15 times (bag_player's passes: a long replay)
set -u
OUT=${OUT:-/tmp/gpu_host_run}
BAGS=${BAGS:-data/scenarios/grasp_nominal}
PASSES=${PASSES:-1}
STEPS=${STEPS:-placement tests verify demo}
on() { case " $STEPS " in *" $1 "*) return 0;; esac; return 1; }
mkdir -p "$OUT"
. bench/gpu_host_ros.sh || { echo "ROS set-up failed"; exit 1; }
export PYTHONUNBUFFERED=1 ROS_DOMAIN_ID=${ROS_DOMAIN_ID:-61}
{
  date -u; nvidia-smi; python3 -V
  python3 -c 'import torch, numpy, cv2, onnxruntime; print("torch", torch.__version__, "numpy", numpy.__version__, "opencv", cv2.__version__, "onnxruntime", onnxruntime.__version__)'
  python3 -c 'import rclpy, iceoryx2; print("rclpy + iceoryx2 import ok")'
  git log -1 --format='%H %s' 2>/dev/null || true
} > "$OUT/env.txt" 2>&1

if on placement; then
echo "== placement_step"
timeout 240 python3 bench/placement_step.py --frames 300 --compile default --out "$OUT" \
  > "$OUT/placement_step.log" 2>&1; echo "placement_step rc=$?"
fi

if on tests; then
echo "== GPU kernel tests"
timeout 300 python3 -m pytest -q -p no:cacheprovider test/kernels/test_gpu_kernels.py \
  > "$OUT/pytest_gpu.txt" 2>&1; echo "pytest rc=$?" | tee -a "$OUT/pytest_gpu.txt"
fi

if on verify; then
echo "== verify"
timeout 420 python3 -m edge_loop.cli verify --output /tmp/verify --ops \
  occupancy.integrate.cuda.float32 occupancy.integrate.cuda.float16 \
  object_locator.pixel_masks.cuda.float32 object_locator.pixel_masks.cuda.float16 \
  object_locator.pixel_masks.cuda.bfloat16 grasp_planner.score.cuda.float32 \
  grasp_planner.score.cuda.float16 grasp_planner.score.cuda.bfloat16 \
  segnet.torch.cuda.float32 segnet.torch.cuda.float16 segnet.torch.cuda.bfloat16 \
  object_locator grasp_planner occupancy.integrate > "$OUT/verify.txt" 2>&1
echo "verify rc=$?" | tee -a "$OUT/verify.txt"
cp config/verified.json config/verify_baseline.json "$OUT/"
fi

if on demo; then
echo "== demo on the bags, default placement and device cuda"
PARAMS=/tmp/gpu_host_pick.yaml
cp config/pick.yaml "$PARAMS"
printf '\nbag_player:\n  ros__parameters:\n    passes: %d\n' "$PASSES" >> "$PARAMS"
for bag in $BAGS; do
  for dev in cpu cuda; do
    tag=$(basename "$bag")_$dev
    echo "--- $bag device $dev passes $PASSES" >> "$OUT/demo.txt"
    timeout $((120 + 10 * PASSES)) python3 -m edge_loop.cli demo --bag "$bag" --device $dev \
      --params-file "$PARAMS" --report /tmp/demo/$tag --log-dir /tmp/demo/logs_$tag >> "$OUT/demo.txt" 2>&1
    echo "demo $tag rc=$?" | tee -a "$OUT/demo.txt"
  done
done
tar czf "$OUT/demo_reports.tar.gz" -C /tmp demo 2>/dev/null
fi
ls -la "$OUT"
