import pytest

from dashboard.store.lifecycle.backoff import delay_table, retry_delay


def test_default_backoff_for_attempts_1_to_10_including_the_cap():
    delays = [retry_delay(attempt, 5, 300) for attempt in range(1, 11)]
    assert delays == [5, 10, 20, 40, 80, 160, 300, 300, 300, 300]


def test_backoff_with_fractional_base_and_huge_attempts():
    assert retry_delay(1, 0.25, 2) == 0.25
    assert retry_delay(3, 0.25, 2) == 1.0
    assert retry_delay(4, 0.25, 2) == 2.0
    assert retry_delay(10_000, 5, 300) == 300


def test_attempt_zero_is_refused():
    with pytest.raises(ValueError):
        retry_delay(0, 5, 300)


def test_delay_table_matches_the_function_and_stops_at_the_cap():
    table = delay_table(5, 300)
    assert table == [retry_delay(a, 5, 300) for a in range(1, len(table) + 1)]
    assert table[-1] == 300 and table[-2] < 300
    assert delay_table(0, 0) == [0.0]
