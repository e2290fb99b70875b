"""Tiny cross-encoder inputs for tests: synthetic questions whose supporting passage names the
asker, settings that train in seconds on one thread, and a saved untrained model folder."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ragfolio.core.data.passages import build_corpus
from ragfolio.core.data.records import Question
from ragfolio.core.retrieval.reranking.cross_encoder_folder import CrossEncoderScorer, TrainedCrossEncoder
from ragfolio.core.retrieval.reranking.fine_tuning import CrossEncoderSettings, new_cross_encoder

PEOPLE = [("Alice", "Paris"), ("Bob", "Rome"), ("Carol", "Oslo"), ("Dave", "Lima"),
          ("Erin", "Cairo"), ("Frank", "Quito"), ("Grace", "Dublin"), ("Heidi", "Tokyo")]

# One thread, short pairs, a few epochs: trains on the synthetic pairs in a few seconds.
TINY = CrossEncoderSettings(epochs=4, batch_size=8, max_length=32, negatives=3, negative_bases=("bm25",),
                            learning_rate=2e-4, warmup_fraction=0.0, dev_depth=4, patience=2, device="cpu", seed=0)


def question_record(i: int, split: str = "train") -> dict[str, Any]:
    """Question ``i``: where person i was born; its supporting passage says so, two others do not."""
    name, city = PEOPLE[i % len(PEOPLE)]
    others = [PEOPLE[(i + j) % len(PEOPLE)] for j in (1, 2)]
    contexts = [{"title": name, "text": f"{name} was born in {city}.", "is_supporting": True}]
    contexts += [{"title": n, "text": f"{n} was born in {c}.", "is_supporting": False} for n, c in others]
    return {"id": f"{split}-{i}", "dataset": "toy", "question": f"Where was {name} born?", "answers": [city],
            "type": None, "contexts": contexts, "split": split}


def questions(n: int = 8, split: str = "train") -> list[Question]:
    return [Question.from_record({k: v for k, v in question_record(i, split).items() if k != "split"})
            for i in range(n)]


def corpus_of(qs: list[Question]):  # noqa: ANN201 - a Corpus
    return build_corpus(qs)


@contextmanager
def one_thread() -> Iterator[None]:
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def save_untrained(path: Path, settings: CrossEncoderSettings = TINY) -> Path:
    """A folder holding a seeded cross-encoder whose head is new (its scores are arbitrary, fixed)."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(settings.seed)
        model = new_cross_encoder(settings)
    TrainedCrossEncoder(CrossEncoderScorer(model, batch_size=4), {"note": "untrained, for tests"}).save(path)
    return path


class Recording:
    """Wraps ``load_cross_encoder``: each scorer it loads records the questions it scores, by folder
    (``scored``), through ``score_rows`` (the family) and ``score`` (the list judge)."""

    def __init__(self, load: Callable[..., CrossEncoderScorer]) -> None:
        self.load, self.scored = load, {}

    def __call__(self, folder: str, **kwargs: Any) -> CrossEncoderScorer:
        scorer, seen = self.load(folder, **kwargs), self.scored.setdefault(str(folder), set())
        score_rows, score = scorer.score_rows, scorer.score

        def recorded_rows(queries, texts, doc_ids):  # noqa: ANN001, ANN202
            seen.update(queries)
            return score_rows(queries, texts, doc_ids)

        def recorded(queries, passages):  # noqa: ANN001, ANN202
            seen.update(queries)
            return score(queries, passages)

        scorer.score_rows, scorer.score = recorded_rows, recorded
        return scorer
