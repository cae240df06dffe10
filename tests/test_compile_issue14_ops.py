"""tg.compile over issue 14's functions: a compiled replay equals the eager call, in
value and gradient, on new inputs of the same shape -- including the data-dependent ops
(sort, median, quantile, take_along_axis of an argsort: the permutation differs from the
recording's on every call)."""

import warnings

import numpy as np
import pytest
import tapegrad as tg

N_CALLS = 4


def _spd(rng, n):
    m = rng.standard_normal((n, n))
    return m @ m.T + n * np.eye(n)


def _sym(rng, n):
    m = rng.standard_normal((n, n))
    return m + m.T


def _compare(fn, make, n_calls=N_CALLS):
    """fn's eager and compiled calls on fresh inputs make(seed) (arrays; the float ones
    become leaves that require grad): outputs and gradients bit-identical."""
    compiled = tg.compile(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error", tg.CompileWarning)    # no silent eager fallback
        for seed in range(n_calls):
            arrays = make(np.random.default_rng(seed))
            results = []
            for f in (fn, compiled):
                leaves = [tg.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
                out = f(*leaves)
                out.backward()
                results.append((out, [t.grad for t in leaves if t.requires_grad]))
            (oe, ge), (oc, gc) = results
            np.testing.assert_array_equal(oc.numpy(), oe.numpy(), err_msg=f"value, call {seed}")
            for i, (a, b) in enumerate(zip(ge, gc)):
                np.testing.assert_array_equal(b.numpy(), a.numpy(),
                                              err_msg=f"gradient {i}, call {seed}")
    assert compiled.cache_info().misses == 1          # it recorded once, then replayed


W = np.arange(1.0, 7.0)


PROGRAMS = {
    "sort_cumsum": (lambda x: (tg.sort(x, axis=-1) * W).sum() + (tg.cumsum(x, axis=0) ** 2).sum(),
                    lambda r: [r.standard_normal((3, 6))]),
    "argsort_take_along_axis": (
        lambda x: (tg.take_along_axis(x, tg.argsort(x, axis=1), axis=1) * W).sum(),
        lambda r: [r.standard_normal((2, 6))]),
    "pad_cumprod": (lambda x: (tg.pad(x, ((1, 2), (0, 1)), mode="reflect") ** 2).sum()
                    + tg.cumprod(x, axis=1).sum(),
                    lambda r: [r.standard_normal((3, 4))]),
    "median": (lambda x: (tg.median(x, axis=0) * W[:5]).sum() + tg.median(x),
               lambda r: [r.standard_normal((4, 5))]),
    "quantile_linear": (lambda x: (tg.quantile(x, [0.2, 0.5, 0.9], axis=1) ** 2).sum(),
                        lambda r: [r.standard_normal((3, 7))]),
    "quantile_nearest_percentile": (
        lambda x: tg.quantile(x, 0.3, method="nearest").sum() * 2
        + tg.percentile(x, [10, 75], method="lower").sum(),
        lambda r: [r.standard_normal(9)]),
    "nanmedian": (lambda x: (tg.nanmedian(tg.where(x > 1.0, np.nan, x), axis=1) * W[:3]).sum(),
                  lambda r: [r.standard_normal((3, 6))]),
    "max_ptp": (lambda x: tg.amax(x, axis=1).sum() + tg.ptp(x, axis=0).sum(),
                lambda r: [r.standard_normal((4, 3))]),
    "linalg_solve_slogdet": (
        lambda a, b: (tg.linalg.solve(a, b) ** 2).sum() + tg.linalg.slogdet(a).logabsdet,
        lambda r: [_spd(r, 3), r.standard_normal(3)]),
    "linalg_cholesky": (lambda a: (tg.linalg.cholesky(a) * np.tri(3)).sum(),
                        lambda r: [_spd(r, 3)]),
    "linalg_norms": (
        lambda a: tg.linalg.norm(a) + tg.linalg.norm(a, ord=2) + tg.linalg.norm(a, ord="nuc")
        + tg.linalg.norm(a[0], ord=1) + tg.linalg.norm(a, ord=np.inf),
        lambda r: [r.standard_normal((3, 3))]),
    "linalg_eigh": (lambda a: (tg.linalg.eigh(a).eigenvalues * W[:3]).sum()
                    + (tg.linalg.eigh(a).eigenvectors[:, 0] ** 2 * W[:3]).sum(),
                    lambda r: [_sym(r, 3)]),
    "linalg_svd_pinv": (lambda a: tg.linalg.svd(a, full_matrices=False).S.sum()
                        + tg.linalg.pinv(a).sum(),
                        lambda r: [r.standard_normal((4, 3))]),
    "linalg_det_inv": (lambda a: tg.linalg.det(a) + tg.linalg.inv(a).sum(),
                       lambda r: [_spd(r, 3)]),
    "scipy_special": (
        lambda x: tg.scipy.special.gammaln(x).sum() + tg.scipy.special.digamma(x).sum()
        + tg.scipy.special.logsumexp(x) + tg.scipy.special.erf(x).sum()
        + (tg.scipy.special.softmax(x, axis=0) * W[:4, None]).sum()
        + tg.scipy.special.xlogy(x, x).sum(),
        lambda r: [r.uniform(0.5, 3.0, (4, 2))]),
    "scipy_stats": (
        lambda x, mu: tg.scipy.stats.norm.logpdf(x, mu, 2.0).sum()
        + tg.scipy.stats.multivariate_normal.logpdf(x, cov=np.diag([1.0, 2.0, 3.0])).sum(),
        lambda r: [r.standard_normal((2, 3)), r.standard_normal(3)]),
    "logsumexp_b": (lambda x, b: tg.logsumexp(x, axis=1, b=b).sum(),
                    lambda r: [r.standard_normal((2, 3)), r.uniform(0.5, 2.0, 3)]),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_compiled_replay_equals_eager_on_new_data(name):
    fn, make = PROGRAMS[name]
    _compare(fn, make)


# -- value checks and host-side masks: replayed on each call's values --------------------
# (each of these gave the recording's answer on a replay: a finite logpmf(1.5), a result
# where eager raises)

def test_poisson_support_is_recomputed_on_replay():
    f = lambda k, mu: tg.scipy.stats.poisson.logpmf(k, mu)      # noqa: E731
    cf = tg.compile(f)
    mu = tg.tensor([2.0, 3.0, 1.5])
    cf(tg.tensor([1.0, 2.0, 0.0]), mu)
    for k in ([1.5, -1.0, 2.0], [0.0, 3.0, 2.5]):
        np.testing.assert_array_equal(cf(tg.tensor(k), mu).numpy(), f(tg.tensor(k), mu).numpy())
    assert cf.cache_info().misses == 1


def _raises_like_eager(f, good, bad, exc, match):
    cf = tg.compile(f)
    cf(*good())
    cf(*good())                                                # a replay
    with pytest.raises(exc, match=match):
        f(*bad())
    with pytest.raises(exc, match=match):
        cf(*bad())
    assert cf.cache_info().misses == 1


def test_dirichlet_checks_run_on_replay():
    _raises_like_eager(lambda x: tg.scipy.stats.dirichlet.logpdf(x, np.array([1.5, 2.0])),
                       lambda: [tg.tensor([0.4, 0.6])], lambda: [tg.tensor([0.2, 0.3])],
                       ValueError, "within the simplex")
    _raises_like_eager(lambda a: tg.scipy.stats.dirichlet.logpdf(np.array([0.4, 0.6]), a),
                       lambda: [tg.tensor([1.5, 2.0], requires_grad=True)],
                       lambda: [tg.tensor([-1.0, 2.0], requires_grad=True)],
                       ValueError, "greater than 0")


def test_average_zero_weights_raise_on_replay():
    _raises_like_eager(lambda x, w: tg.average(x, weights=w),
                       lambda: [tg.ones(3), tg.tensor([1.0, 2.0, 3.0])],
                       lambda: [tg.ones(3), tg.tensor([1.0, -1.0, 0.0])],
                       ZeroDivisionError, "sum to zero")


def test_put_along_axis_duplicate_check_runs_on_replay():
    _raises_like_eager(
        lambda idx, v: tg.put_along_axis(tg.zeros(4), idx, v, None).sum(),
        lambda: [tg.tensor([0, 2]), tg.ones(2, requires_grad=True)],
        lambda: [tg.tensor([1, 1]), tg.ones(2, requires_grad=True)],
        ValueError, "more than once")


def test_svd_and_eigh_backward_checks_run_on_replay():
    def svd_loss(a):
        return tg.linalg.svd(a, full_matrices=False).U.sum()

    def eigh_loss(a):
        return tg.linalg.eigh(a).eigenvectors[:, 0].sum()

    for loss, good, bad, match in [
            (svd_loss, lambda r: r.standard_normal((3, 2)),
             lambda r: np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]]), "zero singular value"),
            (eigh_loss, lambda r: _sym(r, 3), lambda r: np.eye(3), "repeated eigenvalues")]:
        cf = tg.compile(loss)
        for seed in range(2):
            a, b = (tg.tensor(good(np.random.default_rng(seed)), requires_grad=True)
                    for _ in range(2))
            loss(a).backward()
            cf(b).backward()
            np.testing.assert_array_equal(b.grad.numpy(), a.grad.numpy())
        for f in (loss, cf):
            with pytest.raises(np.linalg.LinAlgError, match=match):
                f(tg.tensor(bad(None), requires_grad=True)).backward()
        assert cf.cache_info().misses == 1


def test_lstsq_runs_eagerly_under_compile():
    # its rank (a Python int) and whether it returns residuals depend on a's values
    def f(a, b):
        x, residuals, rank, s = tg.linalg.lstsq(a, b)
        return x.sum() + residuals.sum() + rank

    cf = tg.compile(f)
    b = tg.tensor([1.0, 2.0, 4.0])
    with pytest.warns(tg.CompileWarning, match="linalg.lstsq: the rank it returns"):
        cf(tg.tensor(np.random.default_rng(0).standard_normal((3, 2))), b)
    deficient = tg.tensor([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]])
    assert cf(deficient, b).item() == f(deficient, b).item()


# -- a tensor given where a parameter (a number, a tuple) is expected ----------------------
# (its values are read in Python or by the kernel as a literal: the replays returned the
# recording's repeats, pad widths, shift, spacing, percentile)

@pytest.mark.parametrize("call,params", [
    (lambda x, r: tg.repeat(x, r), ([1, 2, 1, 0, 1], [2, 1, 1, 3, 0])),
    (lambda x, r: tg.tile(x, r), (2, 3)),
    (lambda x, w: tg.pad(x, w), (1, 2)),
    (lambda x, s: tg.roll(x, s), (1, 2)),
    (lambda x, d: tg.gradient(x * x, d), (1.0, 2.0)),
    (lambda x, q: tg.percentile(x, q), (50.0, 90.0)),
    (lambda x, q: tg.quantile(x, q, method="lower"), (0.5, 0.9)),
    (lambda x, k: tg.interp(x, k * tg.arange(5.0), x * x), (1.0, 2.0)),
], ids=["repeat", "tile", "pad", "roll", "gradient", "percentile", "quantile", "interp"])
def test_a_tensor_parameter_runs_eagerly_and_matches_eager(call, params):
    cf = tg.compile(call)
    x = tg.arange(5.0)
    with pytest.warns(tg.CompileWarning, match="runs eagerly"):
        cf(x, tg.tensor(params[0]))
    for p in params:
        np.testing.assert_array_equal(cf(x, tg.tensor(p)).numpy(), call(x, tg.tensor(p)).numpy())


# -- cross_entropy's class weight / ignore_index (issue 15's losses) -----------------------

def test_weighted_cross_entropy_runs_eagerly_and_matches_eager_on_new_labels():
    # Its gradient is built from the labels' values on the host: a replay would reuse the
    # recording's labels.
    w = np.array([0.2, 1.0, 3.0])

    def step(x, t):
        x = x.detach().requires_grad_() if x.requires_grad else x
        loss = tg.cross_entropy(x, t, weight=w, ignore_index=1)
        (g,) = tg.grad(loss, x)
        return loss, g

    x = tg.tensor(np.random.default_rng(3).standard_normal((4, 3)), requires_grad=True)
    cf = tg.compile(step)
    with pytest.warns(tg.CompileWarning, match="built from the labels' values"):
        cf(x, np.array([0, 1, 2, 2]))
    for labels in ([2, 0, 0, 1], [1, 1, 0, 2]):
        got, want = cf(x, np.array(labels)), step(x, np.array(labels))
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_a_replay_given_ignored_labels_it_did_not_record_refuses_instead_of_wrapping():
    # Recorded without a -100 label (the fused path); a later batch with -100 must not
    # index the class axis from the end (silent for >= 100 classes).
    def step(x, t):
        loss = tg.cross_entropy(x, t)
        (g,) = tg.grad(loss, x)
        return g

    x = tg.tensor(np.random.default_rng(4).standard_normal((3, 120)), requires_grad=True)
    cf = tg.compile(step)
    cf(x, np.array([5, 7, 9]))
    cf(x, np.array([1, 2, 3]))
    with pytest.raises(IndexError, match="class label -100 is out of range"):
        cf(x, np.array([5, -100, 9]))
