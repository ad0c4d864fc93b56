"""What the model-backend tests share."""

from __future__ import annotations

import pytest


@pytest.fixture
def model_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Test keys for both model APIs, and no base URL from the environment, so requests go only
    to the fake server a test names."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai-0000")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0000")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
