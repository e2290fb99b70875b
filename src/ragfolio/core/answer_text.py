"""SQuAD answer normalisation: what counts as the same answer, for the scores and for the answering itself.

The selector offers candidates equal after this normalisation once, and the prompts compare
answers with it, so the code that makes answers depends on it; the scores
(:mod:`ragfolio.core.metrics`) do too. It has a module of its own so that answers, which take
hours of LLM calls to make, do not depend on the scores' code: editing a metric re-scores the
stored answers instead of making them again.
"""

from __future__ import annotations

import re
import string

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower-case, drop punctuation and articles, collapse whitespace."""
    text = text.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())
