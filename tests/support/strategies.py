"""Hypothesis strategies more than one test module draws from."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

#: Strings as the table stores them: no NUL, no lone surrogate (both refused on the way in).
storable_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"))


def json_values(max_leaves: int) -> st.SearchStrategy[Any]:
    """Any JSON value with storable strings, up to ``max_leaves`` scalars."""
    return st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | storable_text,
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(storable_text, inner, max_size=4)
        ),
        max_leaves=max_leaves,
    )
