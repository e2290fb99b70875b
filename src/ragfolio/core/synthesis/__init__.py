"""Questions written from documents, for a team that has documents and no labelled questions.

:mod:`~ragfolio.core.synthesis.seeds` picks the passages to write from (spread over the corpus) and
links pairs of them for two-passage questions; :mod:`~ragfolio.core.synthesis.writer_prompts` is what the
writer is asked; :mod:`~ragfolio.core.synthesis.checks` keeps only usable questions;
:mod:`~ragfolio.core.synthesis.writer` runs the three, resumably
(:mod:`~ragfolio.core.synthesis.store`); :mod:`~ragfolio.core.synthesis.judging` turns an
unlabelled query log into labelled questions by judged pooling (the pool:
:mod:`~ragfolio.core.synthesis.pooling`; the judge: :mod:`~ragfolio.core.synthesis.verdicts`), and
:mod:`~ragfolio.core.synthesis.agreement` measures that support against real labels.
"""
