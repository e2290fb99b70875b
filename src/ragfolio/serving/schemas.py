"""Request and response bodies of the service.

Requests are validated twice by the same models: BentoML parses the JSON body against them
(types, unknown fields, ``l >= 1``), then the endpoint validates again with :class:`Limits` as
the validation context, which adds the limits known only at run time (``l <= k`` of the loaded
bundle, the configured query length, batch size and ``num_docs``). Either way a bad request
raises :class:`pydantic.ValidationError`, which BentoML answers with a 400 whose ``detail`` lists
each error's ``loc`` (the field) and ``msg`` (the limit).

Every string and list of a request also has a ``max_length`` in the schema itself (the ceilings
below), which the settings cannot exceed (:class:`ragfolio.serving.config.ServingConfig` checks):
the configured ``max_query_chars`` and ``max_batch`` are at most these, and the request body as a
whole is bounded before it is parsed (``max_body_bytes``, :mod:`ragfolio.serving.guard`). A query's
schema says it must hold a character that is not blank (``pattern``: :data:`NOT_BLANK`, the rule of
:func:`check_query`). The OpenAPI document at ``/docs.json`` shows these schemas with the running
service's limits written in (:mod:`ragfolio.serving.openapi`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from ragfolio.core.corpus.filters import FilterError, parse_filter

_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True)

QUERY_CHARS_CEILING = 100_000  # the schemas' max_length of a query; max_query_chars may be at most this
BATCH_CEILING = 1_024  # the schemas' max_length of a batch; max_batch may be at most this

# A character that str.strip() keeps: the schema's form of check_query's "not blank" (ECMAScript and
# Python read it alike; a test checks it against str.isspace).
NOT_BLANK = r"[^\t-\r\x1c- \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
QueryText = Annotated[str, Field(max_length=QUERY_CHARS_CEILING, json_schema_extra={"pattern": NOT_BLANK})]


def _integral(value: Any) -> Any:
    """A number without a fraction as an int: JSON Schema's ``integer`` holds ``2.0``, which strict mode refuses."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


# A count of at least 1 that takes 2.0 as 2 (not "2", not 2.5); its bounds in the type, so that the
# schema of an optional field shows them (pydantic leaves a bound on the union out of the schema).
Count = Annotated[int, Field(ge=1), BeforeValidator(_integral)]


@dataclass(frozen=True)
class Limits:
    """Run-time limits of a request: ``k`` of the bundle and the configured maxima."""

    k: int
    max_query_chars: int
    max_batch: int
    max_num_docs: int


def _limits(info: ValidationInfo) -> Limits | None:
    return info.context.get("limits") if isinstance(info.context, dict) else None


def check_query(query: str, limits: Limits | None, field: str = "query") -> str:
    """``query`` if it has a non-space character and at most ``limits.max_query_chars`` characters."""
    if not query.strip():
        raise PydanticCustomError("string_blank", "{field} is empty or whitespace only", {"field": field})
    if limits is not None and len(query) > limits.max_query_chars:
        raise PydanticCustomError(
            "string_too_long", "{field} has {length} characters; the limit is max_query_chars={limit}",
            {"field": field, "length": len(query), "limit": limits.max_query_chars},
        )
    return query


def check_l(l: int | None, limits: Limits | None) -> int | None:  # noqa: E741 - the API's name
    if l is not None and limits is not None and l > limits.k:
        raise PydanticCustomError(
            "less_than_equal", "l={l} must be in 1..{k} (k, the bundle's members)", {"l": l, "k": limits.k}
        )
    return l


def check_num_docs(num_docs: int | None, limits: Limits | None) -> int | None:
    if num_docs is not None and limits is not None and num_docs > limits.max_num_docs:
        raise PydanticCustomError(
            "less_than_equal", "num_docs={n} must be in 1..{limit} (max_num_docs)",
            {"n": num_docs, "limit": limits.max_num_docs},
        )
    return num_docs


class _Routed(BaseModel):
    """The ``l`` field every request has: members to route to, 1..k."""

    model_config = _STRICT

    l: Count | None = Field(None, description="Members to route to; default: the configured default_l.")  # noqa: E741

    @field_validator("l")
    @classmethod
    def _l(cls, value: int | None, info: ValidationInfo) -> int | None:
        return check_l(value, _limits(info))


class _RoutedRetrieval(_Routed):
    """``l`` and ``num_docs``: the retrieval requests' common fields."""

    num_docs: Count | None = Field(None, description="Passages per member; default: the bundle's num_docs.")

    @field_validator("num_docs")
    @classmethod
    def _num_docs(cls, value: int | None, info: ValidationInfo) -> int | None:
        return check_num_docs(value, _limits(info))


class _Query(BaseModel):
    """The ``query`` field: non-empty, at most ``max_query_chars``."""

    model_config = _STRICT

    query: str = Field(max_length=QUERY_CHARS_CEILING, json_schema_extra={"pattern": NOT_BLANK},
                       description="The question (at most max_query_chars, not blank).")

    @field_validator("query")
    @classmethod
    def _query(cls, value: str, info: ValidationInfo) -> str:
        return check_query(value, _limits(info))


class _Filtered(BaseModel):
    """The ``filter`` field: a metadata filter every member keeps to (:mod:`ragfolio.core.corpus.filters`)."""

    model_config = _STRICT

    filter: dict[str, Any] | None = Field(
        None, description='Passages whose metadata match, e.g. {"source": "wiki", "year": {"gte": 2020}}: equality, '
                          'eq, ne, in, nin, gt, gte, lt, lte, exists, and, or, not; "id" and "title" name the '
                          "passage's own. Every member searches only the matching passages.")

    @field_validator("filter")
    @classmethod
    def _filter(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            try:
                parse_filter(value)
            except FilterError as exc:
                raise PydanticCustomError("filter", "{message}", {"message": str(exc)}) from None
        return value


class RetrieveRequest(_Query, _RoutedRetrieval, _Filtered):
    """``POST /retrieve``: route one query and return the routed members' passages."""


class BatchRetrieveRequest(_RoutedRetrieval, _Filtered):
    """``POST /batch_retrieve``: :class:`RetrieveRequest` for a list of queries."""

    queries: list[QueryText] = Field(min_length=1, max_length=BATCH_CEILING,
                                     description="The questions (at most max_batch).")

    @field_validator("queries")
    @classmethod
    def _queries(cls, value: list[str], info: ValidationInfo) -> list[str]:
        limits = _limits(info)
        if limits is not None and len(value) > limits.max_batch:
            raise PydanticCustomError(
                "too_long", "queries has {n} items; the limit is max_batch={limit}",
                {"n": len(value), "limit": limits.max_batch},
            )
        return [check_query(q, limits, f"queries[{i}]") for i, q in enumerate(value)]


class AnswerRequest(_Query, _Routed, _Filtered):
    """``POST /answer``: route, retrieve, answer with each routed member's passages, select."""

    stream: bool = Field(False, description="Send the answer as server-sent events as it is written (token events, "
                                            "then the whole response as an answer event) instead of one JSON body.")


# --- responses ------------------------------------------------------------------------------------
class Passage(BaseModel):
    """A corpus passage; ``score`` is the member's own score (not comparable across members)."""

    id: str
    title: str
    text: str
    score: float | None = None
    metadata: dict[str, Any] | None = None


class MergedPassage(BaseModel):
    """A passage of the merged list, with the members that returned it (router order)."""

    id: str
    title: str
    text: str
    metadata: dict[str, Any] | None = None
    members: list[str]


class MemberResult(BaseModel):
    """One routed member's answer to the query."""

    name: str
    family: str
    router_score: float | None = Field(description="The router's score (the learned router's: a cosine); null when not routed.")
    ok: bool
    error: str | None = Field(None, description="Why the member was left out: 'timeout after <s> s' or 'failed "
                                                "(...)'; the exception is in the server log, not here.")
    latency_ms: float
    passages: list[Passage]


class RetrieveResponse(BaseModel):
    """The routed members, their passages and the passages merged by rank (all rank-1s first)."""

    query: str
    l: int  # noqa: E741
    num_docs: int
    routed: bool = Field(
        True, description="False: routing was not shown to help at this l on the dev questions (the bundle's "
                          "routed_ls), so the single best member alone returned l x num_docs passages.")
    members: list[MemberResult]
    passages: list[MergedPassage]
    degraded: bool
    reasons: list[str] = Field(description="'<member>: <error>' for each member left out (error as in MemberResult).")
    latency_ms: dict[str, float] = Field(
        description="route, shared (query parts), members (wall), total; stage.<name>: the routing's stages "
                    "(features, predict; first_stage and members for the routers that see the retrieval), the batch's."
    )
    batch_size: int = Field(1, description="Queries routed and retrieved together with this one (latencies are the batch's).")


class BatchRetrieveResponse(BaseModel):
    results: list[RetrieveResponse]
    degraded: bool
    latency_ms: float


class Candidate(BaseModel):
    member: str
    answer: str


class Tokens(BaseModel):
    prompt: int
    completion: int
    total: int
    calls: dict[str, dict[str, Any]] = Field(description="Per LLM call: prompt/completion tokens, latency_ms.")


class AnswerResponse(BaseModel):
    """The selected answer, every member's candidate answer and what it cost."""

    query: str
    l: int  # noqa: E741
    routed: bool = Field(
        True, description="False: routing was not shown to help at this l on the dev questions (the bundle's "
                          "routed_ls), so the single best member alone returned l x num_docs passages.")
    answer: str = Field(description="The answer; when abstained, a sentence saying the documents do not answer "
                                    "the question.")
    abstained: bool = Field(False, description="The reader's answer is not read from the passages (the abstention "
                                               "rule, serving.yml's answerer.abstain), so it is not served as the "
                                               "answer: it is in guess.")
    guess: str | None = Field(description="The reader's answer when abstained, else null.")
    citations: list[Passage] = Field(
        default_factory=list,
        description="The passages the chosen answer was read from, as the reader named them: in its order, each once "
                    "(a subset of the chosen member's passages; every passage handed over is in members and passages).")
    chosen: int = Field(description="Index into candidates of the selected answer; -1: closed-book.")
    chosen_member: str | None
    fallback: bool = Field(description="The selector named no candidate, so the top-routed answer was taken.")
    candidates: list[Candidate]
    members: list[MemberResult] = Field(description="The routed members and the passages each answer used.")
    passages: list[MergedPassage]
    degraded: bool
    reasons: list[str]
    latency_ms: dict[str, float] = Field(
        description="route, retrieve, answer, select, total; stage.<name>: the routing's stages (the batch's)."
    )
    batch_size: int = Field(1, description="Queries whose retrieval was batched with this one's.")
    tokens: Tokens


class MemberInfo(BaseModel):
    name: str
    family: str
    params: dict[str, Any]


class PortfolioInfo(BaseModel):
    """``GET /portfolio``: what is served."""

    name: str
    version: str
    checksum: str
    ragfolio_version: str
    k: int
    default_l: int
    num_docs: int
    n_passages: int
    corpus_fingerprint: str = Field(
        description="The served corpus's fingerprint; the pipeline's reports name the corpus they measured by it."
    )
    members: list[MemberInfo]
    router: str = Field(description="The served router's kind: learned, pre_retrieval, post_retrieval, ...")
    routed_ls: list[int] | None = Field(
        None, description="The l's at which the router routes: only where its dev same-budget test passed Holm's "
                          "step-down over every router x l (router_training's do-no-harm rule). A request for "
                          "another l is served by single_best alone at l x num_docs passages. None: every l is "
                          "routed.")
    single_best: str = Field(description="The member with the best train mean: what serves the l's not routed.")
    router_choice: dict[str, Any] | None = Field(
        None, description="Why this router is served and where it routes (router_training.bundle.router: auto "
                          "picks the largest gain over the default member on the dev questions among routers "
                          "whose dev same-budget test passed Holm's step-down at some l; never test): the reason "
                          "with the numbers, routing (on, partial or off), routed_ls, default_l, the evidence "
                          "per l (intervals at their Holm level, p-values), the values compared "
                          "and what the report measured of it on dev and test; None for a bundle written "
                          "before the choice was recorded.")
    selection: dict[str, Any] = Field(description="The metrics the members were selected with.")
    selector_seed: int = Field(description="Seed of the order the selector sees the candidate answers in (the bundle's; "
                                           "answering evaluation measured with it).")
    routing: dict[str, Any]
    limits: dict[str, Any]
    live: dict[str, Any] | None = Field(
        None, description="The living corpus: updates applied (version), passages added and removed since the "
                          "bundle's corpus (base_corpus), their share of it (delta_share), whether the portfolio "
                          "may be stale, and the members that rank added passages only after the next run.")


class DocumentsRequest(BaseModel):
    """``POST /documents``: passages added, or replaced where their id exists, all or none."""

    model_config = _STRICT

    documents: list[dict[str, Any]] = Field(
        min_length=1, description='Passages {"id"?, "title"?, "text", "metadata"?}; an id that exists is replaced, '
                                  "one left out is the hash of the title and text (at most live_updates.max_documents).")


class DocumentsResponse(BaseModel):
    """What an update did, and the corpus after it."""

    version: int
    added: list[str]
    replaced: list[str]
    deleted: list[str]
    passages: int
    delta_share: float
    stale: bool
