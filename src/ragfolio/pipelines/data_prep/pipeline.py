from typing import Any

from kedro.pipeline import Pipeline, node

from ragfolio.pipelines.data_prep.nodes import build_corpora, load_questions


def create_pipeline(**kwargs: Any) -> Pipeline:
    return Pipeline(
        [
            node(load_questions, inputs={"params": "params:data_prep"}, outputs="labelled_questions", name="load_questions"),
            node(
                build_corpora,
                inputs={"questions": "labelled_questions", "params": "params:data_prep"},
                outputs="corpora",
                name="build_corpora",
            ),
        ]
    )
