"""The routes the service mounts next to BentoML's APIs: ``GET /portfolio``, OpenAI's ``/v1/``, the live
updates (``POST /documents``, ``GET`` and ``DELETE /documents/{id}``), the playground at ``GET /`` and the OpenAPI
document at ``GET /docs.json``.

BentoML's APIs are ``POST`` with BentoML's own bodies; these routes live in a small Starlette app
mounted at ``/`` next to them, which BentoML consults before its own routes: so the playground
takes the place of BentoML's index page and :mod:`ragfolio.serving.openapi`'s document the place
of BentoML's ``/docs.json``, which lists only BentoML's own APIs. Each view hands over to the
running service (:class:`ragfolio.serving.service.RagfolioService`).
"""

from __future__ import annotations

import bentoml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ragfolio.serving.playground import playground_view


async def portfolio_view(request: Request) -> JSONResponse:
    """``GET /portfolio``: the members, their parameters and selection metrics, version and checksum."""
    service = bentoml.get_current_service()
    return JSONResponse(service.engine.portfolio().model_dump(mode="json"))


async def models_view(request: Request) -> JSONResponse:
    """``GET /v1/models``: OpenAI's list of models, the one served."""
    return JSONResponse(bentoml.get_current_service().models())


async def chat_completions_view(request: Request) -> Response:
    """``POST /v1/chat/completions``: see :meth:`ragfolio.serving.service.RagfolioService.chat_completions`."""
    return await bentoml.get_current_service().chat_completions(await request.body())


async def documents_view(request: Request) -> Response:
    """``POST /documents``: see :meth:`ragfolio.serving.live_documents.DocumentsAPI.add`."""
    return await bentoml.get_current_service().documents.add(await request.body())


async def document_view(request: Request) -> Response:
    """``GET /documents/{id}``: the passage; ``DELETE``: see
    :meth:`ragfolio.serving.live_documents.DocumentsAPI.delete`."""
    documents = bentoml.get_current_service().documents
    if request.method == "DELETE":
        return await documents.delete(request.path_params["pid"])
    return documents.get(request.path_params["pid"])


async def docs_view(request: Request) -> JSONResponse:
    """``GET /docs.json``: every endpoint, with the limits the running service enforces."""
    return JSONResponse(bentoml.get_current_service().openapi())


portfolio_app = Starlette(routes=[Route("/portfolio", portfolio_view, methods=["GET"]),
                                  Route("/v1/models", models_view, methods=["GET"]),
                                  Route("/v1/chat/completions", chat_completions_view, methods=["POST"]),
                                  Route("/documents", documents_view, methods=["POST"]),
                                  Route("/documents/{pid:path}", document_view, methods=["GET", "DELETE"]),
                                  Route("/docs.json", docs_view, methods=["GET"]),
                                  Route("/", playground_view, methods=["GET"])])
