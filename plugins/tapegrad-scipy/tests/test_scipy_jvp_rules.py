"""Forward-mode (JVP) rules of tapegrad-scipy: every op with a VJP has one; the contract
kit checks each against finite differences and against its VJP; hand tests check one
tangent at a time against central differences of the op itself (broadcasting, the
logsumexp scale b, the triangle solve_triangular reads, sqrtm's symmetric part, 'same'
convolutions), and that the elementwise rules keep the VJPs' conventions at their edges
(xlogy at x == 0) bit for bit."""

import numpy as np
import pytest
import tapegrad as tg
import tapegrad.testing

PLUGIN = "tapegrad-scipy"

# Ops of this plugin with a VJP but, on purpose, no JVP rule (with the reason). Empty.
NO_JVP = {}

DIFFERENTIABLE = sorted(name for name, op in tg.registry().ops.items()
                        if op.plugin == PLUGIN and op.vjp is not None)

RNG = np.random.default_rng(5)


def normal(*shape):
    return RNG.standard_normal(shape)


def positive(*shape):
    return RNG.uniform(0.5, 2.5, shape)


def rule(name):
    return tg.registry().ops[name].jvp


def _as_input(v):
    return tg.tensor(v) if isinstance(v, np.ndarray) else v


def apply_rule(name, inputs, tangents, **params):
    xs = [_as_input(x) for x in inputs]
    ts = tuple(None if t is None else tg.tensor(t) for t in tangents)
    ans = tg.registry().ops[name](*xs, **params)
    got = rule(name)(ts, ans, *xs, **params)
    assert isinstance(got, tg.Tensor), f"{name}: the rule returned {type(got).__name__}"
    return np.broadcast_to(got.numpy(), ans.shape)


def check_jvp(name, inputs, tangents, rtol=1e-6, atol=1e-8, **params):
    """The op's tangent in forward mode (tg.jvp's path: the engine calls the rule) against
    central differences along the tangents (None: that input stays)."""
    op = tg.registry().ops[name]
    return tapegrad.testing.check_jvp(lambda *xs: op(*xs, **params), inputs, tangents,
                                      rtol=rtol, atol=atol)


# ---------------------------------------------------------------------------------------
# Coverage and the contract kit
# ---------------------------------------------------------------------------------------

def test_every_differentiable_op_has_a_jvp_rule():
    missing = sorted(n for n in DIFFERENTIABLE if rule(n) is None and n not in NO_JVP)
    assert missing == []
    assert len(DIFFERENTIABLE) > 30


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_contract_kit_checks_the_jvp_rule(name, contract_reports):
    checks = contract_reports[name].checks
    assert "float64 JVP rule vs finite differences" in checks
    assert "JVP rule is the transpose of the VJP rule" in checks
    assert "float64 JVP rule differentiable (reverse over forward)" in checks


# ---------------------------------------------------------------------------------------
# Elementwise binary ops: one tangent at a time, and the VJPs' conventions
# ---------------------------------------------------------------------------------------

BINARY = ["beta", "betaln", "xlogy", "xlog1py", "rel_entr", "kl_div"]


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("which", [0, 1])
def test_binary_rule_with_one_tangent_matches_finite_differences(name, which):
    x, y = positive(3, 1), positive(4)
    tangents = [normal(3, 1), None] if which == 0 else [None, normal(4)]
    check_jvp(name, [x, y], tangents)


@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
def test_xlogy_tangent_at_its_edges_is_its_gradient(name):
    # x == 0 with y == 0 (and y <= 0, resp. -1): the derivatives there are conventions
    # (PyTorch's); the JVP (diagonal) must give exactly what the VJP gives, per input.
    edge = 0.0 if name == "xlogy" else -1.0
    x = np.array([0.0, 0.0, 0.0, 1.5, 2.0])
    y = np.array([edge, edge - 0.5, 0.7, 0.7, edge + 1.0])
    for which in (0, 1):
        t = np.array([1.0, -2.0, 3.0, 0.5, 4.0])
        tangents = [t, None] if which == 0 else [None, t]
        with np.errstate(divide="raise", invalid="raise"):
            got = apply_rule(name, [x, y], tangents)
        xs = [tg.tensor(x, requires_grad=True), tg.tensor(y, requires_grad=True)]
        tg.registry().ops[name](*xs).backward(tg.tensor(t))
        np.testing.assert_array_equal(got, xs[which].grad.numpy())
        assert np.all(np.isfinite(got))


@pytest.mark.parametrize("name", BINARY)
def test_binary_tangent_keeps_float32_with_a_python_number_input(name):
    x = tg.tensor(positive(3).astype(np.float32))
    t = tg.tensor(normal(3).astype(np.float32))
    op = tg.registry().ops[name]
    for args, tangents in (((x, 1.5), (t, None)), ((1.5, x), (None, t))):
        ans = op(*args)
        assert ans.dtype == np.float32
        assert rule(name)(tangents, ans, *args).dtype == np.float32


# ---------------------------------------------------------------------------------------
# logsumexp, softmax, log_softmax
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("params", [dict(), dict(axis=1), dict(axis=0, keepdims=True),
                                    dict(axis=(0, 1))])
@pytest.mark.parametrize("which", ["a", "b", "both"])
def test_logsumexp_tangent_in_a_and_in_the_scale_b(params, which):
    a, b = normal(3, 4), positive(4)
    ta = normal(3, 4) if which in ("a", "both") else None
    tb = normal(4) if which in ("b", "both") else None
    check_jvp("scipy_special_logsumexp", [a, b], [ta, tb], **params)


def test_logsumexp_tangent_with_b_a_python_number():
    a = 10 * normal(5)
    check_jvp("scipy_special_logsumexp", [a, 1.0], [normal(5), None], rtol=1e-5)


@pytest.mark.parametrize("name", ["scipy_special_softmax", "scipy_special_log_softmax"])
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2)])
def test_softmax_tangents(name, axis):
    x = normal(2, 3, 4)
    check_jvp(name, [x], [normal(2, 3, 4)], axis=axis)


# ---------------------------------------------------------------------------------------
# linalg
# ---------------------------------------------------------------------------------------

def _triangular(n, lower):
    a = 0.3 * normal(n, n) + np.diag(RNG.uniform(1.0, 2.0, n))
    return np.tril(a) if lower else np.triu(a)


@pytest.mark.parametrize("trans", [0, 1])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("which", ["a", "b", "both"])
def test_solve_triangular_tangent(trans, lower, which):
    a, b = _triangular(4, lower), normal(4, 2)
    ta = normal(4, 4) if which != "b" else None
    tb = normal(4, 2) if which != "a" else None
    check_jvp("scipy_linalg_solve_triangular", [a, b], [ta, tb], trans=trans,
                      lower=lower)


def test_solve_triangular_tangent_ignores_what_the_solve_does_not_read():
    # Lower solve with unit_diagonal: a tangent on the upper triangle and the diagonal
    # changes nothing (the kernel never reads them).
    a, b = _triangular(3, True), normal(3)
    ta = np.triu(normal(3, 3))
    got = apply_rule("scipy_linalg_solve_triangular", [a, b], [ta, None], lower=True,
                     unit_diagonal=True)
    np.testing.assert_array_equal(got, 0.0)


def _spd(n):
    m = normal(n, n)
    return m @ m.T / n + np.eye(n)


def test_sqrtm_tangent_of_a_symmetric_direction():
    a, t = _spd(3), normal(3, 3)
    t = t + t.T
    check_jvp("scipy_linalg_sqrtm", [a], [t], rtol=1e-5)


def test_sqrtm_tangent_only_sees_the_symmetric_part():
    a, t = _spd(3), normal(3, 3)
    skew = t - t.T
    got = apply_rule("scipy_linalg_sqrtm", [a], [skew])
    np.testing.assert_allclose(got, 0.0, atol=1e-12)
    # and X dX + dX X = sym(dA): the defining equation, checked directly
    x = tg.scipy_linalg_sqrtm(tg.tensor(a)).numpy()
    dx = apply_rule("scipy_linalg_sqrtm", [a], [t])
    np.testing.assert_allclose(x @ dx + dx @ x, (t + t.T) / 2, atol=1e-10)


@pytest.mark.parametrize("which", ["r", "c", "both"])
def test_sylvester_tangent(which):
    r, c = _spd(3), normal(3, 3)
    tr = normal(3, 3) if which != "c" else None
    if tr is not None:
        tr = tr + tr.T                        # the kernel takes R's symmetric part
    tc = normal(3, 3) if which != "r" else None
    check_jvp("_scipy_linalg_sylvester_sym", [r, c], [tr, tc], rtol=1e-5)


# ---------------------------------------------------------------------------------------
# signal
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("shapes", [((6,), (3,)), ((3,), (5,)), ((4, 5), (2, 3))])
@pytest.mark.parametrize("which", [0, 1])
def test_convolve_tangent_with_one_input_tangent(mode, shapes, which):
    s1, s2 = shapes
    in1, in2 = normal(*s1), normal(*s2)
    tangents = [normal(*s1), None] if which == 0 else [None, normal(*s2)]
    check_jvp("scipy_signal_convolve", [in1, in2], tangents, mode=mode)
