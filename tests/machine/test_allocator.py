"""The allocator settings `outre train` applies under a memory budget: glibc's answer, not ours."""

from __future__ import annotations

import pytest

from outre_async.machine import _allocator as allocator

pytestmark = pytest.mark.skipif(not allocator.glibc_allocator(), reason="needs glibc's mallopt")


def test_pin_and_trim_act_on_glibc() -> None:
    assert allocator.pin_mmap_threshold() is True  # glibc's own default, accepted (and left in place for the suite)
    assert allocator.trim_heap() is True


def test_the_users_variable_stands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(allocator.ENV_VARIABLE, "65536")
    assert allocator.pin_unless_user_chose() is False
    monkeypatch.delenv(allocator.ENV_VARIABLE)
    assert allocator.pin_unless_user_chose() is True
