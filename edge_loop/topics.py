# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Topic names of the contract (DESIGN.md) and of the topics this package chose."""

# Inputs (RealSense-style, remappable).
COLOR = '/camera/color/image_raw'
CAMERA_INFO = '/camera/color/camera_info'
DEPTH = '/camera/aligned_depth_to_color/image_raw'
JOINT_STATES = '/gripper/joint_states'
TCP_POSE = '/arm/tcp_pose'             # geometry_msgs/PoseStamped: gripper TCP in world (driver)

# Contract outputs, stamped with the source camera frame's header.stamp.
OBJECT = '/edge_loop/object'            # geometry_msgs/PoseStamped
OBJECTS = '/edge_loop/objects'          # geometry_msgs/PoseArray
GRASP = '/edge_loop/grasp'              # geometry_msgs/PolygonStamped
OCCUPANCY = '/edge_loop/occupancy'      # nav_msgs/OccupancyGrid
DIAGNOSTICS = '/diagnostics'            # diagnostic_msgs/DiagnosticArray

# Chosen by this package (standard types with a header).
GRASP_STATE = '/edge_loop/grasp_state'  # diagnostic_msgs/DiagnosticArray, one status 'grasp_state'
# geometry_msgs/PolygonStamped: the planner's next-best jaw rectangles, 4 points each, best first
GRASP_ALTERNATIVES = '/edge_loop/grasp_alternatives'
# sensor_msgs/Image mono8 (mono16 past 255 objects): the locator's segmentation, 0 = background,
# k = the k-th pose of /edge_loop/objects with the same stamp (the grasp planner's input)
LABELS = '/edge_loop/labels'
ARM_CMD = '/edge_loop/cmd/arm'          # geometry_msgs/TwistStamped, gripper velocity in world
GRIPPER_CMD = '/edge_loop/cmd/gripper'  # sensor_msgs/JointState: position=[opening m], effort=[N]
MARKERS = '/edge_loop/markers'          # visualization_msgs/MarkerArray (RViz)
FRAMES = '/edge_loop/frames'            # sensor_msgs/CameraInfo: one per shared-memory frame
# diagnostic_msgs/DiagnosticArray, transient local: the deadline monitor's safe stops, which the
# pick controller carries out (edge_loop/nodes/safe_stop.py)
SAFE_STOP = '/edge_loop/safe_stop'

# Simulator ground truth (sim_robot and scenario bags only).
SIM_OBJECTS = '/sim/objects'            # geometry_msgs/PoseArray, visible-surface centroids
SIM_MASK = '/sim/mask'                  # sensor_msgs/Image mono16, 0 = background, k = object k
SIM_OCCUPANCY = '/sim/occupancy'        # nav_msgs/OccupancyGrid, true occupancy of the workspace
SIM_GRASP_OUTCOME = '/sim/grasp_outcome'  # diagnostic_msgs/DiagnosticArray
CLOCK = '/clock'

CAMERA_INPUTS = (COLOR, DEPTH, CAMERA_INFO)

# Message type of each topic this package publishes (for generic subscribers).
TYPES = {
    OBJECT: 'geometry_msgs/msg/PoseStamped',
    OBJECTS: 'geometry_msgs/msg/PoseArray',
    GRASP: 'geometry_msgs/msg/PolygonStamped',
    GRASP_ALTERNATIVES: 'geometry_msgs/msg/PolygonStamped',
    LABELS: 'sensor_msgs/msg/Image',
    OCCUPANCY: 'nav_msgs/msg/OccupancyGrid',
    GRASP_STATE: 'diagnostic_msgs/msg/DiagnosticArray',
    ARM_CMD: 'geometry_msgs/msg/TwistStamped',
    GRIPPER_CMD: 'sensor_msgs/msg/JointState',
    MARKERS: 'visualization_msgs/msg/MarkerArray',
    SAFE_STOP: 'diagnostic_msgs/msg/DiagnosticArray',
}
