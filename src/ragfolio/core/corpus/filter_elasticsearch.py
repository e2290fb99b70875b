"""Translating a parsed filter into an Elasticsearch query clause.

``In`` becomes ``term`` (one value) or ``terms``, ``Range`` ``range``, ``Exists`` ``exists``, and the
logical nodes ``bool`` with ``must``, ``should`` (``minimum_should_match: 1``) or ``must_not``. The clause
belongs in a ``bool`` query's ``filter`` list, beside the text query it restricts.

Elasticsearch matches a list field as the local evaluation does (a term: some element equals it; a
range: some element lies inside it) and treats an empty list as missing, as ``exists`` does here. What
differs is typing, which the index mapping decides: a term on a ``text`` field matches analysed tokens
(map ``title`` to a ``keyword`` sub-field), and a string compared with a numeric field is an error in
Elasticsearch where it is no match here.
"""

from __future__ import annotations

from typing import Any

from ragfolio.core.corpus.filter_nodes import And, Exists, In, Node, Not, Or, Range


def to_elasticsearch(node: Node, *, prefix: str, id_field: str, title_field: str) -> dict[str, Any]:
    """The clause for ``node``; metadata key ``k`` is the field ``prefix + k``, the pseudo-fields ``id``
    and ``title`` are ``id_field`` and ``title_field``."""

    def name(field: str) -> str:
        return id_field if field == "id" else title_field if field == "title" else prefix + field

    def clause(node: Node) -> dict[str, Any]:
        match node:
            case In(field, values) if len(values) == 1:
                return {"term": {name(field): values[0]}}
            case In(field, values):
                return {"terms": {name(field): list(values)}}
            case Range(field):
                return {"range": {name(field): node.bounds()}}
            case Exists(field):
                return {"exists": {"field": name(field)}}
            case And(children):
                return {"bool": {"must": [clause(child) for child in children]}}
            case Or(children):
                return {"bool": {"should": [clause(child) for child in children], "minimum_should_match": 1}}
            case Not(child):
                return {"bool": {"must_not": [clause(child)]}}
        raise TypeError(f"not a filter node: {node!r}")

    return clause(node)
