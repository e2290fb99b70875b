"""Stage 4, selection: the portfolio of k candidates that maximises best-of-k on ``U``.

* :mod:`~ragfolio.core.selection.gains`: the facility-location objective and its marginal gains.
* :mod:`~ragfolio.core.selection.greedy`: greedy, lazy greedy and stochastic greedy.
* :mod:`~ragfolio.core.selection.baseline_portfolios`: exhaustive search and the baselines (top-k by average,
  single best, random) with the portfolio value they are judged by.
* :mod:`~ragfolio.core.selection.certificate`: a bound on how far greedy can be from the optimum.
* :mod:`~ragfolio.core.selection.best_of_k`: best-of-k curves and win shares on held-out rows.
* :mod:`~ragfolio.core.selection.sample_complexity`: how many training questions a portfolio needs.

Import from the submodules; this ``__init__`` imports nothing.
"""
