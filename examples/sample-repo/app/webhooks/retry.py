"""Retry policy for webhook deliveries (ADR-0007): capped exponential backoff, full jitter."""

from __future__ import annotations

import random
from dataclasses import dataclass

RETRYABLE_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    base_delay: float = 30.0
    factor: float = 2.0
    max_delay: float = 3600.0
    max_attempts: int = 8
    jitter: float = 1.0  # 1.0 = full jitter (ADR-0007), 0.0 = none (tests)

    def delay_for(self, attempt: int) -> float:
        """Seconds to wait before retry number `attempt` (1 = the first retry)."""
        raw = self.base_delay * self.factor ** (attempt - 1)
        if self.jitter:
            capped = min(raw, self.max_delay)
            return random.uniform(capped * (1 - self.jitter), capped)
        return raw

    def should_retry(self, attempt: int, status: int | None) -> bool:
        """Whether retry number `attempt` is worth making; status None is a transport error."""
        if attempt >= self.max_attempts:
            return False
        return status is None or status in RETRYABLE_STATUSES
