"""tg.random's discrete draws and *_like creation (issue 15, "Sampling").

Statistics tests use a fixed seed and Pearson's chi-square statistic against the
distribution's exact cell probabilities, with the 0.999 quantile of chi2(cells - 1) as the
bound (a correct sampler fails one seed in a thousand; the seeds are fixed, so the tests are
deterministic). Reference probabilities are computed by hand from the definitions.
"""

import itertools

import numpy as np
import pytest
import tapegrad as tg
from scipy import stats


def _chi2_ok(counts, probs):
    counts = np.asarray(counts, dtype=float).ravel()
    probs = np.asarray(probs, dtype=float).ravel()
    assert np.all(counts[probs == 0] == 0), "a zero-probability cell was drawn"
    keep = probs > 0
    expected = counts.sum() * probs[keep]
    chi2 = ((counts[keep] - expected) ** 2 / expected).sum()
    bound = stats.chi2.ppf(0.999, keep.sum() - 1)
    assert chi2 < bound, (chi2, bound)


def test_multinomial_with_replacement_matches_probs():
    tg.manual_seed(0)
    w = np.array([1.0, 0.0, 2.0, 3.0, 4.0, 0.0])       # unnormalised, zeros inside and last
    out = tg.random.multinomial(tg.tensor(w), 20000, replacement=True)
    assert out.shape == (20000,) and out.dtype == np.int64
    _chi2_ok(np.bincount(out.numpy(), minlength=6), w / w.sum())


def test_multinomial_rows_are_independent_distributions():
    tg.manual_seed(1)
    w = np.array([[0.0, 0.0, 1.0], [5.0, 1.0, 0.0]], dtype=np.float32)
    out = tg.random.multinomial(tg.tensor(w), 5000, replacement=True).numpy()
    assert out.shape == (2, 5000)
    assert np.all(out[0] == 2)
    _chi2_ok(np.bincount(out[1], minlength=3), w[1] / w[1].sum())


def test_multinomial_without_replacement_is_successive_proportional_draws():
    tg.manual_seed(2)
    p = np.array([1.0, 2.0, 3.0, 4.0]) / 10
    rows = 20000
    out = tg.random.multinomial(tg.tensor(np.tile(p, (rows, 1))), 2).numpy()
    assert out.shape == (rows, 2)
    assert np.all(out[:, 0] != out[:, 1])
    # P(first i, then j) = p_i * p_j / (1 - p_i)
    cells = list(itertools.permutations(range(4), 2))
    probs = [p[i] * p[j] / (1 - p[i]) for i, j in cells]
    counts = [np.sum((out[:, 0] == i) & (out[:, 1] == j)) for i, j in cells]
    _chi2_ok(counts, probs)


def test_multinomial_without_replacement_all_categories_is_a_permutation():
    tg.manual_seed(3)
    out = tg.random.multinomial(tg.tensor([[1.0, 1e-6, 3.0, 2.0]] * 50), 4).numpy()
    assert np.all(np.sort(out, axis=1) == np.arange(4))


@pytest.mark.parametrize("probs, k, repl, match", [
    ([[[1.0]]], 1, True, "1-D or 2-D"),
    (np.zeros((2, 0)), 1, True, "no categories"),
    ([1.0, -0.5], 1, True, "non-negative"),
    ([1.0, np.nan], 1, True, "finite"),
    ([[1.0, 2.0], [0.0, 0.0]], 1, True, "sums to zero"),
    ([1.0, 2.0], 0, True, "positive"),
    ([1.0, 2.0], 3, False, "cannot draw 3 samples from 2"),
    ([1.0, 0.0, 2.0], 3, False, "fewer than 3 non-zero"),
])
def test_multinomial_errors(probs, k, repl, match):
    with pytest.raises(ValueError, match=match):
        tg.random.multinomial(tg.tensor(np.asarray(probs, dtype=float)), k, replacement=repl)


def test_multinomial_refuses_integer_probs():
    with pytest.raises(TypeError, match="floating-point"):
        tg.random.multinomial(tg.tensor([1, 2]), 1)


def test_categorical_is_multinomial_of_softmax():
    tg.manual_seed(4)
    logits = np.array([0.5, -1.0, 2.0, -np.inf])
    out = tg.random.categorical(tg.tensor(logits), 20000).numpy()
    p = np.exp(logits - logits.max())
    _chi2_ok(np.bincount(out, minlength=4), p / p.sum())
    with pytest.raises(ValueError, match="all -inf"):
        tg.random.categorical(tg.tensor([[-np.inf, -np.inf]]))
    with pytest.raises(ValueError, match="nan"):
        tg.random.categorical(tg.tensor([0.0, np.nan]))


def test_randint_range_uniformity_and_errors():
    tg.manual_seed(5)
    v = tg.random.randint(-3, 4, size=(14000,))
    assert v.dtype == np.int64 and v.shape == (14000,)
    v = v.numpy()
    assert v.min() >= -3 and v.max() <= 3
    _chi2_ok(np.bincount(v + 3, minlength=7), np.full(7, 1 / 7))
    assert tg.random.randint(10).shape == ()
    assert tg.random.randint(10, size=3, dtype=np.int32).dtype == np.int32
    with pytest.raises(ValueError, match="high must be greater"):
        tg.random.randint(5, 5, (2,))
    with pytest.raises(ValueError, match="2\\*\\*53"):
        tg.random.randint(0, 2 ** 60, (2,))
    with pytest.raises(TypeError, match="integer type"):
        tg.random.randint(0, 3, (2,), dtype=np.float64)
    with pytest.raises(ValueError, match="does not fit"):
        tg.random.randint(0, 300, (2,), dtype=np.int8)
    with pytest.raises(ValueError, match="negative"):
        tg.random.randint(0, 3, (-1,))


def test_randint_like():
    x = tg.zeros((2, 3), dtype=tg.float32)
    r = tg.random.randint_like(x, 2, 5)
    assert r.shape == (2, 3) and r.dtype == np.float32
    assert set(np.unique(r.numpy())) <= {2.0, 3.0, 4.0}
    assert tg.random.randint_like(tg.zeros(4, dtype=np.int64), 3).dtype == np.int64


def test_permutation_is_uniform_over_orderings():
    tg.manual_seed(6)
    perms = [tuple(tg.random.permutation(3).tolist()) for _ in range(3000)]
    cells = list(itertools.permutations(range(3)))
    assert set(perms) <= set(cells)
    _chi2_ok([perms.count(c) for c in cells], np.full(6, 1 / 6))


def test_permutation_of_a_tensor_shuffles_rows_and_keeps_gradients():
    tg.manual_seed(7)
    x = tg.tensor(np.arange(12.0).reshape(4, 3), requires_grad=True)
    y = tg.random.permutation(x)
    assert sorted(map(tuple, y.numpy().tolist())) == sorted(map(tuple, x.numpy().tolist()))
    (y * tg.tensor(np.arange(4.0)[:, None])).sum().backward()
    # each row's gradient is the weight of the place it went to
    place = [int(r[0] // 3) for r in y.numpy()]
    expect = np.zeros((4, 3))
    for pos, row in enumerate(place):
        expect[row] = pos
    assert np.array_equal(x.grad.numpy(), expect)
    assert tg.random.permutation(0).shape == (0,)
    with pytest.raises(ValueError, match="0-d"):
        tg.random.permutation(tg.tensor(1.0))
    with pytest.raises(ValueError, match="non-negative"):
        tg.random.permutation(-1)


def test_bernoulli_frequency_dtype_and_errors():
    tg.manual_seed(8)
    p = tg.tensor(np.full(20000, 0.3, dtype=np.float32))
    b = tg.random.bernoulli(p)
    assert b.dtype == np.float32 and b.shape == (20000,)
    ones = int(b.numpy().sum())
    assert set(np.unique(b.numpy())) == {0.0, 1.0}
    _chi2_ok([20000 - ones, ones], [0.7, 0.3])
    assert tg.random.bernoulli(tg.tensor([0.0, 1.0])).tolist() == [0.0, 1.0]
    assert tg.random.bernoulli(0.5, size=(2, 2)).shape == (2, 2)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        tg.random.bernoulli(tg.tensor([1.5]))
    with pytest.raises(TypeError, match="floating-point"):
        tg.random.bernoulli(tg.tensor([1]))


def test_rand_like_and_randn_like_follow_input():
    x = tg.zeros((3, 2), dtype=tg.float32)
    for fn in (tg.random.rand_like, tg.random.randn_like):
        r = fn(x)
        assert r.shape == (3, 2) and r.dtype == np.float32 and not r.requires_grad
        assert fn(x, dtype=np.float64).dtype == np.float64
        assert fn(x, requires_grad=True).requires_grad
    assert np.all((tg.random.rand_like(tg.zeros(1000)).numpy() >= 0))


def test_seeded_draws_repeat():
    p = tg.tensor([0.2, 0.3, 0.5])
    tg.manual_seed(9)
    a = [tg.random.multinomial(p, 2).tolist(), tg.random.randint(100, size=5).tolist(),
         tg.random.permutation(7).tolist()]
    tg.manual_seed(9)
    b = [tg.random.multinomial(p, 2).tolist(), tg.random.randint(100, size=5).tolist(),
         tg.random.permutation(7).tolist()]
    assert a == b


def test_compiled_draws_are_fresh_on_every_replay():
    p = tg.tensor([[1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]])

    def f(p):
        return (tg.random.multinomial(p, 8) * 1, tg.random.randint(1000, size=8) + 0,
                tg.random.permutation(8) + 0)

    cf = tg.compile(f)
    tg.manual_seed(10)
    draws = [tuple(tuple(np.ravel(t.numpy())) for t in cf(p)) for _ in range(4)]
    assert len(set(draws)) == 4
    tg.manual_seed(10)
    eager = [tuple(tuple(np.ravel(t.numpy())) for t in f(p)) for _ in range(4)]
    assert eager == draws


def test_compiled_replays_check_each_calls_values():
    cf = tg.compile(lambda p: tg.random.multinomial(p, 1, replacement=True) * 1)
    cb = tg.compile(lambda p: tg.random.bernoulli(p) * 1)
    cc = tg.compile(lambda z: tg.random.categorical(z) * 1)
    for _ in range(2):                                   # record, then replay
        cf(tg.tensor([[1.0, 2.0]]))
        cb(tg.tensor([0.5, 0.5]))
        cc(tg.tensor([[0.0, 1.0]]))
    with pytest.raises(ValueError, match="sums to zero"):
        cf(tg.tensor([[0.0, 0.0]]))
    with pytest.raises(ValueError, match="non-negative"):
        cf(tg.tensor([[1.0, -2.0]]))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        cb(tg.tensor([0.5, 2.0]))
    with pytest.raises(ValueError, match="all -inf"):
        cc(tg.tensor([[-np.inf, -np.inf]]))
