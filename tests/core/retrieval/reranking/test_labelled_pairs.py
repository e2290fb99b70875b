"""Training pairs come from train questions only, with hard negatives from the first stages in turn."""

from __future__ import annotations

import numpy as np
from cross_encoders import corpus_of, question_record, questions

from ragfolio.core.retrieval.reranking.labelled_pairs import (
    TRAIN_SPLIT,
    LabelledPairs,
    labelled_pairs,
    rerank_cases,
    split_questions,
)


def test_split_questions_keeps_one_split_and_a_seeded_draw_of_it() -> None:
    records = [question_record(i, split) for split in ("train", "dev", "test") for i in range(6)]
    train = split_questions(records, TRAIN_SPLIT)
    assert [q.id for q in train] == [f"train-{i}" for i in range(6)]
    drawn = split_questions(records, TRAIN_SPLIT, limit=3, seed=1)
    assert len(drawn) == 3 and {q.id for q in drawn} <= {q.id for q in train}
    assert [q.id for q in drawn] == [q.id for q in split_questions(records, TRAIN_SPLIT, limit=3, seed=1)]
    assert [q.id for q in split_questions(records, "dev")] == [f"dev-{i}" for i in range(6)]


def test_pairs_are_the_gold_passages_and_hard_negatives_round_robin() -> None:
    qs = questions(4)
    corpus = corpus_of(qs)  # six passages
    texts = [f"{t}. {x}" for t, x in zip(corpus.titles, corpus.texts, strict=True)]
    gold0 = corpus.row_of()[qs[0].gold_passage_ids()[0]]
    others = [r for r in range(len(corpus)) if r != gold0]
    first = np.array([[gold0, others[0], others[1], -1], [0, 1, 2, 3]])
    second = np.array([[others[2], gold0, others[0], others[3]], [3, 2, 1, 0]])
    pairs = labelled_pairs(qs[:2], corpus, texts, [first, second], negatives=3)
    mine = [i for i, qid in enumerate(pairs.question_ids) if qid == qs[0].id]
    assert [pairs.labels[i] for i in mine] == [1.0, 0.0, 0.0, 0.0]
    # by rank, the first stages in turn: gold0 (skipped), others[2], others[0], gold0, others[1], ...
    assert [pairs.passages[i] for i in mine] == [texts[gold0], texts[others[2]], texts[others[0]], texts[others[1]]]
    assert set(pairs.queries[i] for i in mine) == {qs[0].question}
    assert len(LabelledPairs.concat([pairs, pairs])) == 2 * len(pairs)


def test_rerank_cases_name_the_gold_rows() -> None:
    qs = questions(3)
    corpus = corpus_of(qs)
    cases = rerank_cases(qs, corpus, np.zeros((3, 5), dtype=np.int64))
    assert cases.doc_ids.shape == (3, 5) and len(cases) == 3
    assert [len(g) for g in cases.gold] == [1, 1, 1]
