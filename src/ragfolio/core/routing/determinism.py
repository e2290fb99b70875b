"""Fits that give the same bits in any process: fixed threads, a private seeded generator, deterministic kernels.

A router trained by ``kedro run``, by a Kubeflow step or on a Dask worker must be the same file:
``dvc repro`` and the tests compare artifacts byte for byte. Three things can make two processes
differ on the same inputs, and :func:`deterministic_fit` fixes each for the duration of one fit:

- **threads**: a float32 sum split over another number of threads rounds differently, and the
  thread counts a process starts with depend on where it runs (a Dask worker sets
  ``OMP_NUM_THREADS=1``, a container sees other cores). Inside, torch's intra-op pool and the
  BLAS/OpenMP pools (``threadpoolctl``) use :data:`FIT_THREADS`;
- **random state**: what ran before in the process (another fit, dropout in a warm-up) moves
  torch's global generator. Inside, torch's CPU generator is forked (:func:`torch.random.fork_rng`)
  and seeded, so initialisation and dropout draw from the fit's own seed, and the caller's state
  is as it was on exit: nothing is seeded globally. numpy draws use a local
  ``np.random.default_rng(seed)`` in the fits themselves;
- **kernels**: ``torch.use_deterministic_algorithms(True)`` refuses an operation that has no
  deterministic implementation instead of running a nondeterministic one.

Everything is restored on exit, errors included. Thread counts are per process, so two fits must
not run at once in threads of one process (the pipelines fit one router at a time).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from threadpoolctl import threadpool_limits

logger = logging.getLogger(__name__)

# Threads of every fit. One: the routers are small (a fit takes seconds on one core), and one is
# the count every machine, worker and container can give, so the bits do not depend on where.
FIT_THREADS = 1


@contextmanager
def deterministic_fit(seed: int | None = None, threads: int = FIT_THREADS) -> Iterator[None]:
    """Run the body with fixed threads, deterministic torch kernels and (with ``seed``) torch's
    CPU generator forked and seeded; every setting is restored on exit.

    Args:
        seed: Seed of torch's CPU generator inside; None leaves the generator alone.
        threads: Threads of torch's intra-op pool and of the BLAS/OpenMP pools inside, ``>= 1``.

    Raises:
        ValueError: ``threads < 1``.
    """
    if threads < 1:
        raise ValueError(f"threads={threads} must be >= 1")
    previous_threads = torch.get_num_threads()
    previous_deterministic = torch.are_deterministic_algorithms_enabled()
    previous_warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    with threadpool_limits(limits=threads), torch.random.fork_rng(devices=[]):
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(True)
        try:
            if seed is not None:
                torch.default_generator.manual_seed(seed)  # the forked CPU generator, restored when the fork ends
            yield
        finally:
            torch.use_deterministic_algorithms(previous_deterministic, warn_only=previous_warn_only)
            torch.set_num_threads(previous_threads)
