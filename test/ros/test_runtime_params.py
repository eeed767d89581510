# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""A parameter set at runtime (issue 35): validated, in effect, or refused with the reason.

Never accepted and silently ignored: a stage's parameters are read at configure, so while
the node is configured a change is refused and says how to apply it; a ``live`` parameter
takes effect at once; a wrong type or value is refused whatever the state.
"""

from __future__ import annotations

import pytest
from rclpy.parameter import Parameter

from edge_loop.nodes.stage_base import Param, StageNode

pytestmark = [pytest.mark.ros, pytest.mark.every_distro]


class RuntimeStage(StageNode):
    """A stage with one parameter of each runtime kind."""

    PARAMS = (Param('gain', 1.0, 'Read at configure', min=0.0, max=10.0),
              Param('scene', 'a', 'Read again later', choices=('a', 'b'), at_runtime='later'))

    def __init__(self, context) -> None:
        super().__init__('runtime_stage', context=context)


@pytest.fixture
def stage(ros_domain):
    import rclpy

    context = rclpy.Context()
    rclpy.init(context=context, domain_id=ros_domain[0])
    node = RuntimeStage(context)
    yield node
    node.destroy_node()
    context.try_shutdown()


def _set(node, name, value):
    result = node.set_parameters([Parameter(name, value=value)])[0]
    return result.successful, result.reason


def test_runtime_changes_are_validated_applied_or_refused_with_the_reason(stage):
    # Unconfigured: a valid value is taken (read at the next configure), a wrong one is not.
    assert _set(stage, 'gain', 2.0) == (True, '')
    ok, why = _set(stage, 'gain', 'loud')
    assert not ok and "'gain' = 'loud': expected a double" in why
    ok, why = _set(stage, 'transport', 'carrier pigeon')
    assert not ok and 'must be one of shm, ros' in why
    stage.trigger_configure()
    assert stage.configured and stage.params['gain'] == 2.0
    # Configured: read-at-configure parameters are refused, saying how to apply them.
    ok, why = _set(stage, 'gain', 3.0)
    assert not ok and "'gain' is read at configure" in why and '/runtime_stage' in why
    assert stage.get_parameter('gain').value == 2.0 and stage.params['gain'] == 2.0
    # A live one takes effect at once; a 'later' one is accepted for the node to read.
    assert _set(stage, 'debug_delay_ms', 5) == (True, '')
    assert stage.params['debug_delay_ms'] == 5.0
    assert _set(stage, 'scene', 'b') == (True, '')
    assert not _set(stage, 'scene', 'c')[0]
    # After cleanup the node reads everything again at configure: changes are taken.
    stage.trigger_cleanup()
    assert not stage.configured and _set(stage, 'gain', 3.0) == (True, '')
