"""``check_int`` and ``check_float``: the one place numeric settings are range-checked."""

from __future__ import annotations

import math

import pytest

from htm_core.errors import InvalidBudgetError, ValidationError
from htm_core.validation import check_float, check_int


@pytest.mark.parametrize(("value", "low", "high", "message"), [
    (0, 1, None, "n must be a positive integer, got 0"),
    (True, 0, None, "n must be an integer of at least 0, got True"),
    (2.0, 1, None, "n must be a positive integer, got 2.0"),
    ("3", 1, None, "n must be a positive integer, got '3'"),
    (11, 0, 10, "n must be an integer from 0 to 10, got 11"),
    (-1, 0, 10, "n must be an integer from 0 to 10, got -1"),
])
def test_check_int_refuses_what_is_out_of_range_or_not_an_int(
        value: object, low: int, high: int | None, message: str) -> None:
    with pytest.raises(InvalidBudgetError) as caught:
        check_int("n", value, low, high)
    assert str(caught.value) == message


def test_check_int_returns_the_value_and_raises_the_error_asked_for() -> None:
    assert check_int("n", 0, 0, 0) == 0
    assert check_int("n", 10**12) == 10**12
    with pytest.raises(ValidationError) as caught:
        check_int("n", 0, error=ValidationError)
    assert type(caught.value) is ValidationError


@pytest.mark.parametrize("value", [0, -0.5, math.nan, math.inf, True, "1", None])
def test_check_float_refuses_what_is_not_a_positive_finite_number(value: object) -> None:
    with pytest.raises(InvalidBudgetError, match=r"^rate must be a positive number of requests"):
        check_float("rate", value, 0, above=True, what="a number of requests per second")


def test_check_float_bounds_and_result() -> None:
    assert check_float("x", 1, 1) == 1.0 and isinstance(check_float("x", 1, 1), float)
    assert check_float("w", 0.25, 0, 1) == 0.25
    with pytest.raises(InvalidBudgetError, match=r"^w must be a number from 0 to 1, got 1.5$"):
        check_float("w", 1.5, 0, 1)
    with pytest.raises(InvalidBudgetError, match=r"^x must be a number of at least 1, got 0.5$"):
        check_float("x", 0.5, 1)
