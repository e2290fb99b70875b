"""The service's answering settings: the answerer's overrides and chat's follow-up rewrites
(``serving.answerer`` and ``serving.chat`` of :mod:`ragfolio.serving.config`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ragfolio.core.answering.abstention import check_rule


class AnswererConfig(BaseModel):
    """Overrides of the bundle's answerer limits (its reader's ``answerer``, :class:`ragfolio.core.answering.answerer.Answerer`'s
    keyword arguments); None: the bundle's. The ``seed`` is the bundle's ``selector_seed``, not a setting."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_answer_tokens: int | None = Field(None, ge=1)
    max_selector_tokens: int | None = Field(None, ge=1)
    max_passage_words: int | None = Field(None, ge=1)
    abstain: Literal["off", "guess", "no_passage", "guess_or_no_passage", "confidence"] | None = Field(
        None, description="When an answer is not served as the answer but as a guess "
                          "(ragfolio.core.answering.abstention); off: never.")
    min_confidence: float | None = Field(None, le=0.0, description="Beside the rule: an answer whose mean token "
                                                                   "log-probability is below this is a guess.")
    select_mode: Literal["judge", "judge_passages", "confidence", "agreement", "agreement_confidence"] | None = Field(
        None, description="How one of several members' answers is served (ragfolio.core.answering.selector).")

    @field_validator("abstain", mode="before")
    @classmethod
    def _off(cls, value: Any) -> Any:
        """YAML 1.1 reads an unquoted ``off`` (a file, ``RAGFOLIO_ANSWERER__ABSTAIN=off``) as false."""
        return None if value is None else check_rule(value)


class ChatConfig(BaseModel):
    """``POST /v1/chat/completions`` (:mod:`ragfolio.serving.openai_api`).

    Attributes:
        rewrite_followups: A request whose last user message follows earlier user or assistant turns
            has it rewritten by the reader's LLM into a standalone question first (one call,
            :mod:`ragfolio.core.answering.conversation`), which is retrieved for and answered;
            False: the last user message is the question, as it is.
        rewrite_timeout_s: Past this the rewrite is given up and the last user message is the question.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    rewrite_followups: bool = True
    rewrite_timeout_s: float = Field(30.0, gt=0)
