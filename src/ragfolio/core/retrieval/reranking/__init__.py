"""A cross-encoder that reads a question and a passage together, trained on the train questions' labels.

* :mod:`~ragfolio.core.retrieval.reranking.labelled_pairs`: the train questions' (question, passage,
  is_supporting) pairs with hard negatives from the first stage, and the dev questions' rerank cases.
* :mod:`~ragfolio.core.retrieval.reranking.fine_tuning`: the settings, the seeded training loop with
  early stopping on dev, and its cache in the retrieval cache.
* :mod:`~ragfolio.core.retrieval.reranking.cross_encoder_folder`: the trained model as a folder
  (safetensors, tokenizer, a manifest of checksums) and the scorer read from it.
* :mod:`~ragfolio.core.retrieval.reranking.cross_fitting`: cross-fitting's folds and the record that
  says which model scores which question (a fold model, trained on the train questions outside its
  fold, scores that fold's questions); :mod:`~ragfolio.core.retrieval.reranking.fold_training` trains
  the fold models.
* :mod:`~ragfolio.core.retrieval.reranking.rerank_quality`: recall@k and MRR of the gold passages,
  reranked against the first stage, with paired bootstrap intervals.

The ``cross_encoder`` family (:mod:`ragfolio.core.retrieval.families.cross_encoder`) reranks a
prefilter base with the scorer.
"""
