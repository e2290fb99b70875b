"""The official Elasticsearch client over a scripted HTTP node: what the client sends, recorded, and
recorded ES 8.x replies (tests/fixtures/elasticsearch/) parsed as a cluster's would be.

:class:`ReplayNode` stands in for elastic_transport's urllib3 node only, so the client serialises every
request and parses every response as it would against a cluster. Import it only after
``pytest.importorskip("elasticsearch")``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from elastic_transport import ApiResponseMeta, BaseNode, HttpHeaders
from elastic_transport._node import NodeApiResponse  # (public in _node only)

from ragfolio.core.retrieval.indexes.elasticsearch_settings import ElasticsearchSettings

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "elasticsearch"
URL = "http://es.invalid:9200"
ES_HEADERS = {
    "content-type": "application/vnd.elasticsearch+json;compatible-with=8",
    "x-elastic-product": "Elasticsearch",
}


def recorded(name: str) -> dict[str, Any]:
    return json.loads((RECORDED / name).read_text())


Reply = tuple[int, dict[str, Any] | None] | Exception


class ReplayNode(BaseNode):
    """An HTTP node that answers from ``script`` in order and records each request."""

    _CLIENT_META_HTTP_CLIENT = ("rp", "1.0")
    script: ClassVar[list[tuple[str, str, Reply]]] = []
    requests: ClassVar[list[tuple[str, str, bytes | None]]] = []

    def perform_request(self, method, target, body=None, headers=None, request_timeout=None) -> NodeApiResponse:
        type(self).requests.append((method, target, body))
        if not type(self).script:
            raise AssertionError(f"unexpected request {method} {target}")
        want_method, want_path, reply = type(self).script.pop(0)
        assert (method, target.split("?")[0]) == (want_method, want_path), (method, target)
        if isinstance(reply, Exception):
            raise type(reply)(*reply.args)  # a fresh one each time: the transport chains retried errors
        status, payload = reply
        data = b"" if payload is None else json.dumps(payload).encode()
        meta = ApiResponseMeta(status=status, http_version="1.1", headers=HttpHeaders(ES_HEADERS), duration=0.0,
                               node=self.config)
        return NodeApiResponse(meta, data)


def replay(script: Sequence[tuple[str, str, Reply]], **settings: Any) -> tuple[ElasticsearchSettings, Any, type]:
    """Settings, a real client over a fresh :class:`ReplayNode` class, and that class."""
    node = type("Node", (ReplayNode,), {"script": list(script), "requests": []})
    es = ElasticsearchSettings(url=URL, retry_backoff=0.0, **settings)
    return es, es.connect(node_class=node), node


def ndjson(body: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in body.decode().splitlines() if line]
