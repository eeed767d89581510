# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Stand-in for tf2_ros' ``static_transform_publisher`` (tf2 is not on PyPI).

Records the arguments launch_ros gave it (one JSON file per process in
$EDGE_LOOP_TF_STANDIN_DIR) and stays up as the real one does; it publishes nothing, since
tf2_msgs is not installable here either.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time


def main() -> int:
    out_dir = os.environ['EDGE_LOOP_TF_STANDIN_DIR']
    path = os.path.join(out_dir, f'{os.getpid()}.json')
    with open(path, 'w') as f:
        json.dump({'argv': sys.argv[1:]}, f)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while True:
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == '__main__':
    sys.exit(main())
