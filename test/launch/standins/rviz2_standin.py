# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Stand-in for ``rviz2`` (not installable from PyPI): what RViz would see, written to a file.

launch_ros starts it exactly as it would start rviz2 (``-d CONFIG --ros-args -r __node:=...
-r remaps -p use_sim_time:=...``). It reads the displays of CONFIG, subscribes to every
display's topic with the message type that display plugin takes, through the same remapping
rules rviz2 would get, and writes to $EDGE_LOOP_RVIZ_STANDIN_OUT (JSON) the config it was
given, the fixed frame and, per display, the resolved topic and how many messages arrived.
The TF display needs tf2_msgs (not on PyPI either) and is only listed.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
import time

import yaml

# rviz_default_plugins display class -> (message module, class)
DISPLAY_MESSAGES = {
    'rviz_default_plugins/Map': ('nav_msgs.msg', 'OccupancyGrid'),
    'rviz_default_plugins/Image': ('sensor_msgs.msg', 'Image'),
    'rviz_default_plugins/Pose': ('geometry_msgs.msg', 'PoseStamped'),
    'rviz_default_plugins/PoseArray': ('geometry_msgs.msg', 'PoseArray'),
    'rviz_default_plugins/Polygon': ('geometry_msgs.msg', 'PolygonStamped'),
    'rviz_default_plugins/MarkerArray': ('visualization_msgs.msg', 'MarkerArray'),
}


def displays(config: dict) -> list[dict]:
    return config['Visualization Manager']['Displays']


def main() -> int:
    import rclpy
    from rclpy.qos import qos_profile_sensor_data

    argv = sys.argv[1:]
    config_path = argv[argv.index('-d') + 1] if '-d' in argv else None
    out_path = os.environ['EDGE_LOOP_RVIZ_STANDIN_OUT']
    config = yaml.safe_load(open(config_path)) if config_path else {}
    rclpy.init(args=sys.argv)
    node = rclpy.create_node('rviz2')
    lock = threading.Lock()
    seen: dict[str, dict] = {}
    for display in displays(config):
        cls = display.get('Class', '')
        topic = (display.get('Topic') or {}).get('Value')
        if cls not in DISPLAY_MESSAGES or not topic:
            seen[display.get('Name', cls)] = {'class': cls, 'topic': topic, 'subscribed': False}
            continue
        module, name = DISPLAY_MESSAGES[cls]
        msg_type = getattr(importlib.import_module(module), name)
        entry = {'class': cls, 'topic': topic, 'subscribed': True, 'messages': 0}
        seen[display['Name']] = entry

        def on_msg(_msg, e=entry):
            with lock:
                e['messages'] += 1

        sub = node.create_subscription(msg_type, topic, on_msg, qos_profile_sensor_data
                                       if cls.endswith('/Image') else 10)
        entry['resolved_topic'] = sub.topic_name

    def write() -> None:
        with lock:
            state = {'config': config_path, 'argv': argv,
                     'fixed_frame': config['Visualization Manager']['Global Options'][
                         'Fixed Frame'] if config else None,
                     'use_sim_time': node.get_parameter('use_sim_time').value,
                     'namespace': node.get_namespace(), 'displays': seen}
        tmp = out_path + '.tmp'
        with open(tmp, 'w') as f:
            json.dump(state, f)
        os.replace(tmp, out_path)

    last = 0.0
    try:
        while rclpy.ok():
            rclpy.spin_once(node, timeout_sec=0.1)
            if time.monotonic() - last > 0.5:
                write()
                last = time.monotonic()
    except (KeyboardInterrupt, Exception):
        pass
    finally:
        write()
    return 0


if __name__ == '__main__':
    sys.exit(main())
