# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""How the check reads a running node's parameters (issue 33 item 4's "unanswered" nodes).

The cause, shown on a real rclpy parameter service: a get_parameters request that names one
undeclared parameter is answered with no values at all. The check asked every node for
``device`` too, which only occupancy_mapper declared, and took object_locator's and
grasp_planner's empty answers for silence.
"""

from __future__ import annotations

import pytest
from rcl_interfaces.msg import ParameterType, ParameterValue

from edge_loop.check import environment
from edge_loop.check.items import Status
from edge_loop.check.node_params import declared_values


def _string(text: str) -> ParameterValue:
    return ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=text)


def _like_rclpy(declared: dict[str, ParameterValue], calls: list[list[str]]):
    """An ``ask`` with rclpy's rule: one undeclared name empties the whole answer."""
    def ask(names: list[str]) -> list[ParameterValue]:
        calls.append(list(names))
        if any(n not in declared for n in names):
            return []
        return [declared[n] for n in names]
    return ask


def test_an_undeclared_name_does_not_hide_the_declared_ones():
    calls: list[list[str]] = []
    ask = _like_rclpy({'transport': _string('shm'), 'nice': ParameterValue(
        type=ParameterType.PARAMETER_INTEGER, integer_value=3)}, calls)
    got = declared_values(['transport', 'device', 'nice'], ask)
    assert got == {'transport': 'shm', 'nice': 3}
    assert calls == [['transport', 'device', 'nice'], ['transport'], ['device'], ['nice']]
    # A full answer is taken as it is, in one call.
    calls.clear()
    assert declared_values(['transport'], ask) == {'transport': 'shm'} and len(calls) == 1


def test_silence_is_none_not_an_empty_answer():
    assert declared_values(['transport'], lambda names: None) is None
    answers = iter([[], None])   # a short answer, then no answer to the single name
    assert declared_values(['transport', 'device'], lambda names: next(answers)) is None
    assert declared_values(['device'], lambda names: []) == {}


def test_a_node_that_did_not_answer_makes_item_8_not_run():
    params = {'object_locator': {'transport': 'shm', 'use_sim_time': False}}
    item = environment.judge_settings(params, {}, {}, {}, True, unanswered=['grasp_planner'])
    assert item.status is Status.NOT_RUN and 'grasp_planner' in item.fix


@pytest.mark.ros
def test_rclpy_parameter_service_empties_the_answer_for_one_undeclared_name(harness):
    import rclpy
    from rcl_interfaces.srv import GetParameters

    server = rclpy.create_node('param_server', context=harness.context)
    server.declare_parameter('transport', 'shm')
    harness.executor.add_node(server)
    client = harness.node.create_client(GetParameters, '/param_server/get_parameters')
    try:
        assert client.wait_for_service(timeout_sec=10.0)

        def ask(names: list[str]) -> list[ParameterValue] | None:
            future = client.call_async(GetParameters.Request(names=names))
            harness.wait_until(future.done, 10.0, 'get_parameters')
            return list(future.result().values)

        assert ask(['transport', 'device']) == []   # the service's rule, not a timeout
        assert declared_values(['transport', 'device'], ask) == {'transport': 'shm'}
    finally:
        harness.node.destroy_client(client)
        harness.executor.remove_node(server)
        server.destroy_node()
