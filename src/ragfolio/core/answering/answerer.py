"""The answerer: answers from passages and, given several members' answers, the selector's choice.

:class:`Answerer` builds the prompts (:mod:`~ragfolio.core.answering.prompts`), reads the replies
(a short answer, the passages it cites and its one-word explanation, in JSON) and, given the answers
of several portfolio members, picks one in its ``select_mode`` (:mod:`~ragfolio.core.answering.selector`):
by the reader's confidence, by agreement, or by asking the LLM to judge, the candidates shown in a
seeded random order (the order the members were routed in would tell a model that copies the first
candidate which one the router preferred). :meth:`Answerer.answer_stream` is the answer as the
reader writes it (:mod:`~ragfolio.core.answering.reply_stream`). The backend comes from
:func:`~ragfolio.core.llm.backends.make_backend`.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Generator, Sequence
from dataclasses import dataclass

import numpy as np

from ragfolio.core.answering.abstention import check_rule, unsupported
from ragfolio.core.answering.confidence import answer_confidence
from ragfolio.core.answering.prompts import (
    answer_messages,
    answer_schema,
    judge_passages_messages,
    parse_choice,
    parse_reply,
    selector_messages,
    selector_schema,
)
from ragfolio.core.answering.reply_stream import answer_pieces
from ragfolio.core.answering.selector import check_mode, distinct_options, pick_without_call
from ragfolio.core.llm.chat import ChatBackend, Completion, Messages
from ragfolio.core.llm.text_streams import stream_chat

logger = logging.getLogger(__name__)

@dataclass(frozen=True)
class Answer:
    """The reader's answer to one question from one set of passages.

    Attributes:
        text: The short answer.
        explanation: Its one-line explanation (the evidence, or "guess"); "" when none was read.
        parsed: Whether the reply was the JSON asked for (False: salvaged from other text).
        completion: The call.
        used: Positions (0-based) in the passages given of those the reader says it read the
            answer from, in its order, each once.
        unsupported: The answerer's abstention rule calls the answer unsupported by the passages
            (:func:`~ragfolio.core.answering.abstention.unsupported`); always False with the rule ``"off"``.
        confidence: The reader's confidence in the answer, the mean log-probability of its tokens
            (:func:`~ragfolio.core.answering.confidence.answer_confidence`); None when the backend
            gives no log-probabilities.
    """

    text: str
    explanation: str
    parsed: bool
    completion: Completion
    used: tuple[int, ...] = ()
    unsupported: bool = False
    confidence: float | None = None


@dataclass(frozen=True)
class Selection:
    """The selector's choice among candidate answers.

    Attributes:
        index: Position of the chosen candidate in the list given (router order).
        answer: That candidate.
        fallback: Whether the reply named no candidate, so the top-routed one was taken.
        completion: The selector call; :meth:`Completion.none` when no call was needed.
        shown: Indices into the list given of the candidates the selector was shown, in the order
            shown (distinct non-empty answers only); empty when no call was needed.
        position: 1-based position, in the order shown, of the candidate the selector named;
            None when no call was made or the reply named none.
        parsed: Whether the reply was the JSON asked for; None when no call was made.
        mode: The selector's mode (:data:`~ragfolio.core.answering.selector.SELECT_MODES`).
    """

    index: int
    answer: str
    fallback: bool
    completion: Completion
    shown: tuple[int, ...] = ()
    position: int | None = None
    parsed: bool | None = None
    mode: str = "judge"


class Answerer:
    """Answers questions from passages, and selects among candidate answers, with one backend.

    Args:
        backend: The chat backend every call goes to.
        max_answer_tokens: Generation limit of an answer.
        max_selector_tokens: Generation limit of a selection.
        max_passage_words: Words kept of each passage in a prompt.
        shuffle_candidates: Show the selector the candidates in a random order drawn from
            ``seed`` and the question (the same question always gets the same order); False: in
            the order given.
        seed: Seed of those orders.
        abstain: The rule that calls an answer unsupported by its passages
            (:data:`~ragfolio.core.answering.abstention.ABSTAIN_RULES`; ``"off"``: none is).
        min_confidence: Beside the rule, an answer whose confidence is below this is unsupported
            (None: no threshold).
        select_mode: How :meth:`choose` picks among several members' answers
            (:data:`~ragfolio.core.answering.selector.SELECT_MODES`).
    """

    def __init__(
        self,
        backend: ChatBackend,
        *,
        max_answer_tokens: int = 64,
        max_selector_tokens: int = 12,
        max_passage_words: int = 100,
        shuffle_candidates: bool = True,
        seed: int = 0,
        abstain: str = "guess",
        min_confidence: float | None = None,
        select_mode: str = "judge",
    ) -> None:
        self.backend = backend
        self.abstain, self.min_confidence = check_rule(abstain), min_confidence
        self.select_mode = check_mode(select_mode)
        self.max_answer_tokens, self.max_selector_tokens = max_answer_tokens, max_selector_tokens
        self.max_passage_words = max_passage_words
        self.shuffle_candidates, self.seed = shuffle_candidates, seed

    def answer(self, question: str, passages: Sequence[tuple[str, str]]) -> Answer:
        """The answer to ``question`` from ``(title, text)`` passages (closed-book if none)."""
        messages = answer_messages(question, passages, max_passage_words=self.max_passage_words)
        completion = self.backend.complete(messages, max_tokens=self.max_answer_tokens,
                                           json_schema=answer_schema(len(passages)))
        return self._read(completion, len(passages))

    def answer_stream(self, question: str, passages: Sequence[tuple[str, str]]) -> Generator[str, None, Answer]:
        """:meth:`answer` as the reader writes it: the answer's text in pieces as each is settled
        (:func:`~ragfolio.core.answering.reply_stream.answer_pieces`: one per piece of the reply,
        empty when it settles nothing; they join to the returned answer's ``text``), then the
        :class:`Answer` that :meth:`answer` returns for the same reply. A backend that cannot
        stream gives the text in one piece once it has answered."""
        messages = answer_messages(question, passages, max_passage_words=self.max_passage_words)
        reply = stream_chat(self.backend, messages, max_tokens=self.max_answer_tokens,
                            json_schema=answer_schema(len(passages)))
        completion = yield from answer_pieces(reply)
        return self._read(completion, len(passages))

    def _read(self, completion: Completion, n_passages: int) -> Answer:
        reply = parse_reply(completion.text)
        if not reply.parsed:
            logger.debug("reader reply %r is not the JSON asked for", completion.text)
        used = tuple(k - 1 for k in reply.used if k <= n_passages)
        confidence = answer_confidence(completion)
        return Answer(reply.answer, reply.explanation, reply.parsed, completion, used,
                      unsupported(self.abstain, reply.explanation, used, n_passages, confidence=confidence,
                                  min_confidence=self.min_confidence), confidence)

    def choose(
        self, question: str, answers: Sequence[Answer], passages: Sequence[Sequence[tuple[str, str]]],
    ) -> Selection:
        """Pick one of several members' ``answers`` (router order) in :attr:`select_mode`;
        ``passages[i]`` are the ``(title, text)`` passages ``answers[i]`` was read from.

        The judge modes call :meth:`select` (``judge_passages`` showing the passages each answer
        cites); the others pick without a call
        (:func:`~ragfolio.core.answering.selector.pick_without_call`). With a single distinct
        non-empty answer no mode calls.
        """
        if len(passages) != len(answers):
            raise ValueError(f"{len(passages)} passage lists for {len(answers)} answers")
        texts = [a.text for a in answers]
        if self.select_mode == "judge":
            return self.select(question, texts, [a.explanation for a in answers])
        if self.select_mode == "judge_passages":
            return self.select(question, texts, cited=[[ps[k] for k in a.used if k < len(ps)]
                                                      for a, ps in zip(answers, passages, strict=True)])
        options = distinct_options(texts)
        index = pick_without_call(self.select_mode, texts, [a.confidence for a in answers])
        shown = tuple(g[0] for g in options.values()) if len(options) > 1 else ()
        return Selection(index, texts[index], False, Completion.none(), shown, mode=self.select_mode)

    def select(
        self, question: str, candidates: Sequence[str], explanations: Sequence[str] | None = None, *,
        cited: Sequence[Sequence[tuple[str, str]]] | None = None,
    ) -> Selection:
        """The LLM judge's choice of one of the candidates (router order: index 0 is the top-routed
        member's answer), each shown with its explanation (``explanations[i]`` for
        ``candidates[i]``; none when None), or, given ``cited`` (the ``(title, text)`` passages
        each candidate cites), with the passages instead (the ``judge_passages`` mode).

        Candidates equal after SQuAD normalisation are offered once, and empty ones not at all,
        in the order of :meth:`shown_order`. With a single distinct non-empty candidate (or none)
        no call is made and the first of them (or index 0) is returned. A reply naming no
        candidate falls back to the first non-empty candidate, which is index 0 unless the top
        member answered nothing.
        """
        if not candidates:
            raise ValueError("select needs at least one candidate")
        mode = "judge" if cited is None else "judge_passages"
        options = [g[0] for g in distinct_options(candidates).values()]
        if len(options) <= 1:
            index = options[0] if options else 0
            return Selection(index, candidates[index], False, Completion.none(), mode=mode)
        for name, given in (("explanations", explanations), ("cited passage lists", cited)):
            if given is not None and len(given) != len(candidates):
                raise ValueError(f"{len(given)} {name} for {len(candidates)} candidates")
        order = self.shown_order(question, options)
        shown = [candidates[i] for i in order]
        completion = self.backend.complete(self._judge_messages(question, order, candidates, explanations, cited),
                                           max_tokens=self.max_selector_tokens, json_schema=selector_schema(len(shown)))
        picked, parsed = parse_choice(completion.text, shown)
        if picked is None:
            logger.debug("selector reply %r names no candidate of %s", completion.text, shown)
        index = options[0] if picked is None else order[picked]
        position = None if picked is None else picked + 1
        return Selection(index, candidates[index], picked is None, completion, tuple(order), position, parsed, mode)

    def _judge_messages(
        self, question: str, order: Sequence[int], candidates: Sequence[str], explanations: Sequence[str] | None,
        cited: Sequence[Sequence[tuple[str, str]]] | None,
    ) -> Messages:
        """The judge's prompt for the candidates at ``order``: with explanations, or with the
        passages they cite, each passage once and numbered in the order first cited."""
        if cited is None:
            return selector_messages(question, [(candidates[i], explanations[i] if explanations is not None else "")
                                                for i in order])
        number: dict[tuple[str, str], int] = {}
        for i in order:
            for passage in cited[i]:
                number.setdefault(passage, len(number) + 1)
        shown = [(candidates[i], [number[p] for p in dict.fromkeys(cited[i])]) for i in order]
        return judge_passages_messages(question, shown, list(number), max_passage_words=self.max_passage_words)

    def shown_order(self, question: str, options: Sequence[int]) -> list[int]:
        """``options`` in the order the selector sees them: a permutation drawn from ``(seed,
        crc32(question))`` when :attr:`shuffle_candidates`, else as given."""
        if not self.shuffle_candidates:
            return list(options)
        rng = np.random.default_rng([self.seed, zlib.crc32(question.encode("utf-8"))])
        return [options[i] for i in rng.permutation(len(options))]
