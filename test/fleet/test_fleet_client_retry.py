# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""A Ray Client session whose server fails to start is tried again, a bounded number of times."""

from __future__ import annotations

import pytest
import ray

from edge_loop.fleet import engine


class _FlakyInit:
    """ray.init stand-in: the first ``failures`` calls fail as Ray Client's proxy does."""

    def __init__(self, failures: int):
        self.failures = failures
        self.calls: list[str] = []

    def __call__(self, address, **kwargs):
        self.calls.append(address)
        if len(self.calls) <= self.failures:
            raise ConnectionAbortedError('Initialization failure from server:\nTraceback ...')


@pytest.fixture
def flaky(monkeypatch):
    def install(failures):
        fake = _FlakyInit(failures)
        monkeypatch.setattr(ray, 'init', fake)
        monkeypatch.setattr(ray, 'is_initialized', lambda: False)
        monkeypatch.setattr(engine, 'CLIENT_RETRY_DELAY_S', 0.0)
        return fake
    return install


def test_a_failed_client_session_start_is_retried(flaky, capsys):
    fake = flaky(2)
    assert engine.ray_init('ray://head:10001', None, None) is True
    assert fake.calls == ['ray://head:10001'] * 3
    assert 'trying again (3/3)' in capsys.readouterr().err


def test_a_server_that_never_starts_fails_with_the_address_and_the_logs_to_read(flaky):
    fake = flaky(10)
    with pytest.raises(ConnectionAbortedError, match=r"'ray://head:10001'.*3 attempts.*"
                       r'Initialization failure from server.*ray_client_server_'):
        engine.ray_init('ray://head:10001', None, None)
    assert len(fake.calls) == engine.CLIENT_SESSION_ATTEMPTS


def test_other_connection_errors_are_not_retried(flaky, monkeypatch):
    calls = []

    def refuse(address, **kwargs):
        calls.append(address)
        raise ConnectionError('ray client connection timeout')
    monkeypatch.setattr(ray, 'init', refuse)
    with pytest.raises(ConnectionError, match='timeout'):
        engine.ray_init('ray://nowhere:1', None, None)
    assert calls == ['ray://nowhere:1']
