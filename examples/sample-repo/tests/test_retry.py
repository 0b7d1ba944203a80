from app.webhooks.retry import RetryPolicy


def policy(**overrides: float) -> RetryPolicy:
    values = dict(base_delay=1.0, factor=2.0, max_delay=30.0, max_attempts=7, jitter=0.0)
    values.update(overrides)
    return RetryPolicy(**values)


def test_delays_double() -> None:
    assert [policy().delay_for(a) for a in range(1, 5)] == [1.0, 2.0, 4.0, 8.0]


def test_full_jitter_stays_within_the_capped_delay() -> None:
    p = policy(jitter=1.0)
    assert all(0.0 <= p.delay_for(a) <= 30.0 for a in range(1, 12))


def test_backoff_schedule_caps_at_max_delay() -> None:
    delays = [policy().delay_for(attempt) for attempt in range(1, 7)]
    assert delays == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0]


def test_gives_up_after_max_attempts() -> None:
    assert policy().should_retry(6, 503)
    assert not policy().should_retry(7, 503)
    assert not policy().should_retry(1, 404)
