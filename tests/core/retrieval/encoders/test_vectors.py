import numpy as np
import pytest

from ragfolio.core.retrieval.encoders.vectors import first_words, l2_normalise


@pytest.mark.parametrize(
    ("text", "n", "expected"),
    [
        ("one  two\tthree\nfour", 3, "one two three"),
        ("  lead and trail  ", 5, "lead and trail"),
        ("", 4, ""),
    ],
)
def test_first_words_keeps_n_words_joined_by_single_spaces(text: str, n: int, expected: str) -> None:
    assert first_words(text, n) == expected


def test_l2_normalise_gives_unit_float32_rows_and_keeps_zero_rows_zero() -> None:
    rows = l2_normalise(np.array([[3.0, 4.0], [0.0, 0.0], [-1.0, 0.0]], dtype=np.float64))
    assert rows.dtype == np.float32
    np.testing.assert_allclose(rows, [[0.6, 0.8], [0.0, 0.0], [-1.0, 0.0]])


def test_resolve_device_auto_takes_cuda_only_when_torch_sees_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from ragfolio.core.retrieval.encoders.vectors import resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == "cpu"
    assert resolve_device("cpu") == "cpu"
    with pytest.raises(ValueError, match="torch sees no CUDA device"):
        resolve_device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == "cuda"
    assert resolve_device("cuda:1") == "cuda:1"
    for bad in ("gpu", "cpu:0", "auto:1"):
        with pytest.raises(ValueError, match="must be one of"):
            resolve_device(bad)


def test_length_batches_hold_one_length_each_and_cover_every_row_once() -> None:
    from ragfolio.core.retrieval.encoders.vectors import length_batches

    lengths = [5, 3, 5, 5, 3, 9, 5]
    batches = length_batches(lengths, batch_size=2)
    assert [b.tolist() for b in batches] == [[1, 4], [0, 2], [3, 6], [5]]  # shortest first, rows in order
    with pytest.raises(ValueError, match="batch_size=0"):
        length_batches(lengths, batch_size=0)
