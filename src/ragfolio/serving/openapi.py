"""The service's OpenAPI document, ``GET /docs.json``: every endpoint, with the limits it enforces.

BentoML's own document (``Service.openapi_spec``) lists its APIs (``/retrieve``, ``/batch_retrieve``,
``/answer``) and its probes, with only the static constraints of the request schemas.
:func:`openapi_document` starts from it and

- adds the routes the service mounts (:mod:`ragfolio.serving.routes`): ``GET /portfolio``,
  ``GET /v1/models``, ``POST /v1/chat/completions``, the live updates (``POST /documents``,
  ``GET`` and ``DELETE /documents/{pid}``) and the playground, ``GET /``;
- writes the running service's limits into every request schema (:func:`limited`): a query at most
  ``max_query_chars`` characters and not blank, at most ``max_batch`` queries, ``l`` in 1..k,
  ``num_docs`` in 1..``max_num_docs``; in a chat request every ``user`` message is such a question
  (the service reads the last one) and at least one is there (:func:`chat_request_schema`);
- lists the statuses each operation answers with and their bodies: the service's JSON error
  (``{"error", "request_id", ...}``) or, under ``/v1/``, OpenAI's; an answer streamed as server-sent
  events (``text/event-stream``); a 401 and the bearer scheme when API keys are on.

A client generated from the document sends requests the service accepts (``tests/serving`` fuzzes
it with schemathesis). It is an OpenAPI 3.1 document: pydantic writes JSON Schema 2020-12, where
``null`` is a type.
"""

from __future__ import annotations

import copy
from typing import Any, Literal

from pydantic import BaseModel, Field

from ragfolio.serving.openai_api import ChatCompletionRequest
from ragfolio.serving.schemas import (
    NOT_BLANK,
    AnswerRequest,
    AnswerResponse,
    BatchRetrieveRequest,
    DocumentsRequest,
    DocumentsResponse,
    Limits,
    Passage,
    PortfolioInfo,
    RetrieveRequest,
)

REF = "#/components/schemas/{model}"
JSON, EVENTS = "application/json", "text/event-stream"
STATUSES = {
    400: "A bad request: the field and the rule it breaks, or why the body was refused unread.",
    401: "No API key, or a wrong one (when API keys are on).",
    403: "Live updates are off (live_updates.enabled).",
    404: "No passage has that id.",
    413: "The body is larger than max_body_bytes.",
    415: "The body is not plain JSON (Content-Type application/json, not compressed).",
    500: "An internal error; the server log has the detail under the request id.",
    502: "The LLM rejected the request.",
    503: "The LLM is unavailable (retrieval still works), or the service is starting.",
    504: "The request took longer than its timeout.",
}
RETRIEVAL_ERRORS = (400, 413, 415, 500, 503, 504)
ANSWER_ERRORS = (400, 413, 415, 500, 502, 503, 504)


# --- the bodies of /v1/ that no request model describes --------------------------------------------
class AssistantMessage(BaseModel):
    role: Literal["assistant"]
    content: str


class ChatChoice(BaseModel):
    index: int
    message: AssistantMessage
    logprobs: None
    finish_reason: Literal["stop"]


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class Citation(BaseModel):
    """A passage the chosen answer was read from (an extension of OpenAI's reply)."""

    index: int
    id: str
    title: str
    members: list[str]


class ChatCompletion(BaseModel):
    """``POST /v1/chat/completions``'s reply (:func:`ragfolio.serving.openai_api.completion_body`)."""

    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    system_fingerprint: str
    choices: list[ChatChoice]
    usage: Usage
    citations: list[Citation] = Field(description="The passages the answer was read from, as the reader named them.")
    retrieved: list[Citation] = Field(description="Every passage the chosen reader was handed.")
    abstained: bool = Field(description="The answer is a guess: the content says the documents do not answer.")
    guess: str | None = Field(description="The reader's answer when abstained, else null.")
    rewritten_question: str | None = Field(
        description="The standalone question a follow-up was rewritten into, which was retrieved for and answered "
                    "(an extension); null: the last user message was, as it is.")


class ModelCard(BaseModel):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str
    bundle: str
    version: str


class ModelList(BaseModel):
    """``GET /v1/models``'s reply (:func:`ragfolio.serving.openai_api.models_body`)."""

    object: Literal["list"]
    data: list[ModelCard]


_NULLABLE_TEXT = {"type": ["string", "null"]}
ERROR_SCHEMA = {
    "type": "object", "required": ["error", "request_id"],
    "properties": {"error": {"type": "string"}, "request_id": {"type": "string"},
                   "detail": {"type": "array", "items": {"type": "object", "properties": {
                       "type": {"type": "string"}, "loc": {"type": "array"}, "msg": {"type": "string"}}}}},
}
OPENAI_ERROR_SCHEMA = {
    "type": "object", "required": ["error"],
    "properties": {"error": {"type": "object", "required": ["message", "type", "param", "code"], "properties": {
        "message": {"type": "string"}, "type": {"enum": ["invalid_request_error", "server_error"]},
        "param": _NULLABLE_TEXT, "code": _NULLABLE_TEXT}}, "request_id": {"type": "string"}},
}


def _options(field: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A field's schema, or each option of its ``anyOf`` (an optional field's)."""
    return [] if field is None else list(field.get("anyOf", [field]))


def limited(schema: dict[str, Any], limits: Limits) -> dict[str, Any]:
    """A request model's JSON schema with the running service's limits written in.

    Returns:
        A copy of ``schema`` whose ``l`` is at most ``limits.k``, ``num_docs`` at most
        ``limits.max_num_docs``, every query at most ``limits.max_query_chars`` characters and
        ``queries`` at most ``limits.max_batch`` items.
    """
    schema = copy.deepcopy(schema)
    fields = schema["properties"]
    for name, top in (("l", limits.k), ("num_docs", limits.max_num_docs)):
        for option in _options(fields.get(name)):
            if option.get("type") == "integer":
                option["maximum"] = top
    if "query" in fields:
        fields["query"]["maxLength"] = limits.max_query_chars
    if "queries" in fields:
        fields["queries"].update(maxItems=limits.max_batch)
        fields["queries"]["items"]["maxLength"] = limits.max_query_chars
    return schema


def chat_request_schema(limits: Limits) -> dict[str, Any]:
    """``POST /v1/chat/completions``'s request: :class:`ChatCompletionRequest` with the limits, and
    messages of which at least one is the user's and every user message a question (a string, or one
    text part, of at most ``max_query_chars`` characters and not blank). Other fields are allowed
    (OpenAI's other fields are ignored)."""
    schema = limited(ChatCompletionRequest.model_json_schema(ref_template=REF), limits)
    question = {"type": "string", "maxLength": limits.max_query_chars, "pattern": NOT_BLANK}
    user = {"type": "object", "required": ["role", "content"], "properties": {
        "role": {"const": "user"},
        "content": {"anyOf": [question, {"type": "array", "minItems": 1, "maxItems": 1, "items": {
            "type": "object", "required": ["type", "text"], "properties": {"type": {"const": "text"}, "text": question}}}]}}}
    other = {"type": "object", "required": ["role"], "properties": {
        "role": {"type": "string", "not": {"const": "user"}},
        "content": {"anyOf": [{"type": "string"}, {"type": "null"}, {"type": "array", "items": {
            "type": "object", "required": ["type"], "properties": {"type": {"type": "string"}, "text": _NULLABLE_TEXT}}}]}}}
    schema["properties"]["messages"] = {
        "type": "array", "minItems": 1, "items": {"oneOf": [user, other]}, "contains": user,
        "description": "The conversation; the question is the last user message (the others are not read)."}
    return schema


# A server-sent event as a client reads it (each event is checked against these): ``/answer``'s
# named events with JSON data (ragfolio.serving.answer_stream), OpenAI's unnamed chunks and [DONE].
ANSWER_EVENT = {"type": "object", "required": ["event", "data"], "properties": {
    "event": {"enum": ["token", "answer", "error"]}, "data": {"type": "string", "contentMediaType": JSON}}}
CHUNK_EVENT = {"type": "object", "required": ["data"], "properties": {
    "event": {"const": "message"},  # unnamed: an SSE client reads the event type "message"
    "data": {"type": "string", "description": "A chat.completion.chunk object as JSON, or [DONE] last."}}}


def _content(schema: dict[str, Any], events: dict[str, Any] | None = None) -> dict[str, Any]:
    """A JSON body of ``schema``, or server-sent ``events`` (each event an object of that schema)."""
    return {JSON: {"schema": schema}} | ({EVENTS: {"schema": events}} if events else {})


def _responses(ok: dict[str, Any], errors: tuple[int, ...], openai: bool, keys: bool) -> dict[str, Any]:
    statuses = sorted({*errors, 503, *((401,) if keys else ())})  # 503 too while the service starts
    error = {"$ref": REF.format(model="OpenAIError" if openai else "Error")}
    return {"200": ok, **{str(s): {"description": STATUSES[s], "content": _content(error)} for s in statuses}}


def _ref(model: type[BaseModel], components: dict[str, Any]) -> dict[str, str]:
    """A reference to ``model``'s schema, added (with the models it refers to) to ``components``."""
    schema = model.model_json_schema(ref_template=REF)
    components.update(schema.pop("$defs", {}))
    components[model.__name__] = schema
    return {"$ref": REF.format(model=model.__name__)}


def openapi_document(bentoml_spec: dict[str, Any], limits: Limits, *, keys: bool) -> dict[str, Any]:
    """The document ``GET /docs.json`` serves (see the module docstring).

    Args:
        bentoml_spec: BentoML's document of the service (``RagfolioService.openapi_spec.asdict()``).
        limits: The running service's request limits.
        keys: API keys are on: every operation but the probes and the playground needs a bearer key.
    """
    doc = copy.deepcopy(bentoml_spec)
    doc["openapi"] = "3.1.0"
    components = doc.setdefault("components", {}).setdefault("schemas", {})
    components |= {"Error": ERROR_SCHEMA, "OpenAIError": OPENAI_ERROR_SCHEMA}
    paths = doc["paths"]
    for path, model, errors in (("/retrieve", RetrieveRequest, RETRIEVAL_ERRORS),
                                ("/batch_retrieve", BatchRetrieveRequest, RETRIEVAL_ERRORS),
                                ("/answer", AnswerRequest, ANSWER_ERRORS)):
        operation = paths[path]["post"]
        ok = {str(status): response for status, response in operation["responses"].items()}["200"]  # keys: ints
        if path == "/answer":  # pydantic's own schema: BentoML's drops null from its optional fields (guess)
            ok["content"] = _content(_ref(AnswerResponse, components), ANSWER_EVENT)
        else:
            ok["content"] = _content(ok["content"][JSON]["schema"])
        operation["requestBody"] = {"required": True, "content": _content(limited(model.model_json_schema(), limits))}
        operation["responses"] = _responses(ok, errors, openai=False, keys=keys)
    paths["/portfolio"] = {"get": {
        "operationId": "portfolio", "description": "The members, the router and the limits served.",
        "responses": _responses({"description": "What is served.", "content": _content(_ref(PortfolioInfo, components))},
                                (500,), openai=False, keys=keys)}}
    paths["/v1/models"] = {"get": {
        "operationId": "list_models", "description": "OpenAI's list of models: the one served.",
        "responses": _responses({"description": "The models.", "content": _content(_ref(ModelList, components))},
                                (500,), openai=True, keys=keys)}}
    chat = chat_request_schema(limits)
    components.update(chat.pop("$defs", {}))
    paths["/v1/chat/completions"] = {"post": {
        "operationId": "chat_completions", "description": "/answer in OpenAI's shapes (stream: server-sent events).",
        "requestBody": {"required": True, "content": _content(chat)},
        "responses": _responses({"description": "The answer.", "content": _content(_ref(ChatCompletion, components),
                                                                                  CHUNK_EVENT)},
                                ANSWER_ERRORS, openai=True, keys=keys)}}
    documents = _responses({"description": "What the update did, and the corpus after it.",
                            "content": _content(_ref(DocumentsResponse, components))}, (400, 403, 500), openai=False, keys=keys)
    paths["/documents"] = {"post": {
        "operationId": "add_documents", "description": "Add passages, or replace those whose id exists; all or none.",
        "requestBody": {"required": True, "content": _content(DocumentsRequest.model_json_schema())},
        "responses": documents}}
    pid = [{"name": "pid", "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}}]
    paths["/documents/{pid}"] = {
        "get": {"operationId": "get_document", "description": "The passage with that id.", "parameters": pid,
                "responses": _responses({"description": "The passage.", "content": _content(_ref(Passage, components))},
                                        (404, 500), openai=False, keys=keys)},
        "delete": {"operationId": "delete_document", "description": "Delete the passage with that id.",
                   "parameters": pid, "responses": {**documents, **_responses(
                       documents["200"], (403, 404, 500), openai=False, keys=keys)}}}
    paths["/"] = {"get": {"operationId": "playground", "description": "The playground page.", "responses": {
        "200": {"description": "An HTML page.", "content": {"text/html": {"schema": {"type": "string"}}}}}}}
    if keys:
        doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        for path in ("/retrieve", "/batch_retrieve", "/answer", "/portfolio", "/v1/models", "/v1/chat/completions",
                     "/documents", "/documents/{pid}"):
            for operation in paths[path].values():
                operation["security"] = [{"bearer": []}]
    return doc
