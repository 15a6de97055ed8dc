"""The JSON text payloads are written as: the same value back from ``json.loads``, and
no float written in a form PostgreSQL's jsonb would give back as an int."""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import given

from sqla_scheduler._types import dumps_payload
from tests.integration.test_payload_fidelity import same
from tests.support.strategies import json_values


@given(json_values(max_leaves=20))
def test_payload_text_reads_back_as_the_same_value(value: Any) -> None:
    assert same(json.loads(dumps_payload(value)), value)


@given(json_values(max_leaves=20))
def test_no_number_is_written_with_a_positive_exponent(value: Any) -> None:
    """json writes a large float as ``1e+20``, which jsonb gives back as an int."""
    assert "e+" not in _numbers_text(dumps_payload(value))


def _numbers_text(text: str) -> str:
    """``text`` with its JSON strings removed."""
    return re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)


def test_whole_floats_are_written_out_with_a_decimal_point() -> None:
    assert dumps_payload(1e20) == "100000000000000000000.0"
    assert dumps_payload({"a": [2.5e22, "1e+20"]}) == (f'{{"a": [{int(2.5e22)}.0, "1e+20"]}}')
    assert dumps_payload("\\u0000 e+") == json.dumps("\\u0000 e+")
    assert dumps_payload(1.5) == "1.5"
