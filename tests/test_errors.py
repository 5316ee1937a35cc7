"""`schedlab.errors`: huge integers in messages are shortened, not printed whole."""

import pytest

from schedlab.errors import short_int, short_repr
from schedlab.ir.expr import IntImm


def test_short_int_keeps_ordinary_numbers_whole():
    for value in (0, 7, -12, 2**63 - 1, -(2**64), 10**24 - 1):
        assert short_int(value) == str(value)


def test_short_int_gives_first_and_last_digits_and_the_count():
    assert short_int(10**24) == "100000...000000 (25 digits)"
    assert short_int(10**400 + 7) == "100000...000007 (401 digits)"
    assert short_int(-(10**400 - 1)) == "-999999...999999 (400 digits)"
    # beyond the 4300 digits Python converts to text at all
    assert short_int(10**9999 + 42) == "100000...000042 (10000 digits)"


def test_short_repr_shortens_inside_lists_and_tuples():
    assert short_repr([None, 10**400, (3,), True, "x"]) == (
        "[None, 100000...000000 (401 digits), (3,), True, 'x']"
    )


def test_constant_out_of_range_message_is_short():
    with pytest.raises(ValueError) as info:
        IntImm("int32", 10**400)
    assert str(info.value) == "IntImm: value 100000...000000 (401 digits) does not fit in int32"
