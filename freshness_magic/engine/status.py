"""The statuses a stage ends with (spec §5.2), apart from the outcome records that carry them:
conditions and ``validate`` name them without loading :mod:`.outcome`."""

from __future__ import annotations

from enum import StrEnum


class StageStatus(StrEnum):
    """Outcome statuses; values are the lowercase strings conditions compare against."""

    SUCCESS = "success"
    PARTIAL_SUCCESS = "partial_success"
    RETRY = "retry"
    FAIL = "fail"
    SKIPPED = "skipped"
    WAITING = "waiting"
    """Engine-internal: the handler needs a human answer, so the run pauses at this node."""

    @property
    def is_success(self) -> bool:
        return self in (StageStatus.SUCCESS, StageStatus.PARTIAL_SUCCESS)

    @classmethod
    def parse(cls, text: str) -> StageStatus:
        """Accept a status by value or name in any case (``success``, ``PARTIAL_SUCCESS``)."""
        lowered = text.strip().lower()
        for status in cls:
            if lowered == status.value:
                return status
        raise ValueError(
            f"unknown outcome status {text!r}; use one of "
            + ", ".join(s.value for s in cls if s is not cls.WAITING)
        )


OUTCOME_VALUES = tuple(s.value for s in StageStatus if s is not StageStatus.WAITING)
"""The statuses a condition's ``outcome=`` can name."""
