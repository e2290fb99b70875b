"""Stage 7, answering: the LLM, answers from the routed members' passages, and the selector.

* :mod:`~ragfolio.core.llm.chat`: the LLM contract and the OpenAI-compatible client.
* :mod:`~ragfolio.core.llm.embedded`, :mod:`~ragfolio.core.llm.server`,
  :mod:`~ragfolio.core.llm.process`: the embedded model, served as its own process and
  supervised by whoever uses it.
* :mod:`~ragfolio.core.llm.backends`: the backend a configuration names.
* :mod:`~ragfolio.core.answering.prompts`, :mod:`~ragfolio.core.answering.answerer`: the prompts and
  reading replies; answering from passages and selecting among answers.
* :mod:`~ragfolio.core.answering.adaptive_rag`: adaptive RAG end to end: answers from the routed
  retrieval of :mod:`ragfolio.core.system` (one per member), and the selector's pick.
* :mod:`~ragfolio.core.answering.conversation`: a chat's follow-up rewritten into a standalone
  question from the earlier turns, before retrieval.

The baselines (Vendi-RAG) and the end-to-end comparison of systems are the lab's: :mod:`ragfolio_lab.answering`.

Import from the submodules; this ``__init__`` imports nothing.
"""
