"""Consolidation refuses settings under which a batch's lease could run out during its model call (it would be
claimed, and paid for, twice)."""

import pytest
from pydantic import ValidationError

from cairn.consolidation.settings import ConsolidationSettings, ExtractionSettings
from cairn.llm import LlmSettings


def test_a_lease_shorter_than_a_model_call_is_refused() -> None:
    with pytest.raises(ValidationError, match="CAIRN_EXTRACTION_LEASE_S"):
        ConsolidationSettings(llm=LlmSettings(timeout_s=60), extraction=ExtractionSettings(lease_s=60))


def test_the_defaults_hold() -> None:
    settings = ConsolidationSettings()
    assert settings.extraction.lease_s > settings.llm.timeout_s
    assert (settings.extraction.debounce_s, settings.extraction.calls_per_hour) == (30.0, 20)
