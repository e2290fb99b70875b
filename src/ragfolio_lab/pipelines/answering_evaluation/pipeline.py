from typing import Any

from kedro.pipeline import Pipeline, node

from ragfolio.core.timings import split_row_timings
from ragfolio.stage_records import trained_routers_node
from ragfolio_lab.answering.answer_reports import (
    em_vs_tokens_table,
    headline_answers,
    plot_em_vs_tokens,
    plot_selector_positions,
    summarize_answers,
)
from ragfolio_lab.pipelines.answering_evaluation.nodes import answer_test_questions, sample_test_questions


def create_pipeline(**kwargs: Any) -> Pipeline:
    return Pipeline(
        [
            trained_routers_node(),
            node(sample_test_questions, inputs={"questions": "questions", "utility_index": "utility_index",
                                                "params": "params:answering_evaluation"},
                 outputs="test_questions", name="sample_test_questions"),
            node(
                answer_test_questions,
                inputs={
                    "test_questions": "test_questions",
                    "bundles": "bundles",  # packaging's: each dataset answers as its bundle serves
                    "served": "bundle",  # and as `bentoml serve` serves by default (service_l<l>)
                    "trained_routers": "trained_routers",  # the other routers, each routing over the same members
                    "answer_store": "answer_store",
                    "params": "params:answering_evaluation",
                },
                outputs=["answer_rows", "retrieval_orders"],
                name="answer_test_questions",
            ),
            # timings go to files of their own (08_reporting/timings/), so what DVC hashes reproduces to the byte
            node(split_row_timings, inputs="answer_rows", outputs=["answers", "answer_latencies"],
                 name="split_answer_timings"),
            node(
                summarize_answers,
                inputs={"answers": "answer_rows", "retrieval_orders": "retrieval_orders"},
                outputs=["answer_metrics", "answer_timings"],
                name="summarize_answers",
            ),
            node(headline_answers, inputs={"metrics": "answer_metrics"}, outputs="answer_headline",
                 name="headline_answers"),
            node(em_vs_tokens_table, inputs={"metrics": "answer_metrics"}, outputs="em_vs_tokens_data", name="em_vs_tokens_table"),
            node(plot_em_vs_tokens, inputs={"metrics": "answer_metrics"}, outputs="em_vs_tokens_plot", name="plot_em_vs_tokens"),
            node(
                plot_selector_positions, inputs={"metrics": "answer_metrics"}, outputs="selector_positions_plot",
                name="plot_selector_positions",
            ),
        ]
    )
