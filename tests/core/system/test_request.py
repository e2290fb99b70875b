"""A request's l and depth: resolved once at the edge, with the defaults and one range check."""

from __future__ import annotations

import pytest

from ragfolio.core.system.request import RequestRules, RetrievalRequest


def test_a_request_gets_the_defaults_it_does_not_give_and_keeps_those_it_gives() -> None:
    rules = RequestRules(default_l=2, default_depth=3, k=4, max_depth=12)
    assert rules.request("q") == RetrievalRequest("q", 2, 3)
    assert rules.request(" q ", 4, 12) == RetrievalRequest(" q ", 4, 12)  # the query as given
    assert rules.request("q", num_docs=1) == RetrievalRequest("q", 2, 1)


@pytest.mark.parametrize(("l", "num_docs", "says"), [
    (0, None, r"l=0 must be in 1..4 \(the bundle's members\)"),
    (5, None, r"l=5 must be in 1..4"),
    (None, 0, r"num_docs=0 must be in 1..12 \(prefilter_depth\)"),
    (None, 13, r"num_docs=13 must be in 1..12"),
])
def test_a_request_out_of_range_is_refused_naming_the_value(l, num_docs, says) -> None:  # noqa: E741
    with pytest.raises(ValueError, match=says):
        RequestRules(2, 3, 4, 12).request("q", l, num_docs)


def test_the_defaults_are_checked_too() -> None:
    with pytest.raises(ValueError, match=r"default_l=5 must be in 1..4 \(the bundle's members\)"):
        RequestRules(5, 3, 4, 12)
    with pytest.raises(ValueError, match=r"num_docs=13 must be in 1..12"):
        RequestRules(2, 13, 4, 12)
