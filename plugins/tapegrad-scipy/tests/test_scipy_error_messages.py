"""Bad inputs to tapegrad-scipy that gave an unclear error or a silent NaN."""

import numpy as np
import pytest
import scipy.stats
import tapegrad as tg


def test_cho_solve_of_a_bare_matrix_names_the_pair():
    # a (2, 2) tensor unpacked into its two rows: "truth value ... ambiguous"
    with pytest.raises(TypeError, match=r"cho_solve: the first argument must be the pair "
                                        r"\(c, lower\).*got a tensor of shape \(2, 2\)"):
        tg.scipy.linalg.cho_solve(tg.ones((2, 2)), tg.ones(2))


def test_dirichlet_with_non_positive_alpha_raises_as_scipy():
    # it gave a silent NaN
    with pytest.raises(ValueError, match="greater than 0"):
        scipy.stats.dirichlet.logpdf([0.5, 0.5], [-1.0, 1.0])
    with pytest.raises(ValueError, match=r"dirichlet: all parameters alpha must be greater "
                                         r"than 0, got \[-1.0, 1.0\]"):
        tg.scipy.stats.dirichlet.logpdf(tg.tensor([0.5, 0.5]), tg.tensor([-1.0, 1.0]))
    with pytest.raises(ValueError, match="greater than 0"):
        tg.scipy.stats.dirichlet.pdf(tg.tensor([0.5, 0.5]), np.array([0.0, 1.0]))


def test_multivariate_normal_with_a_point_of_the_wrong_length_names_the_distribution():
    # it was "reshape: cannot reshape array of size 2 into shape (1,3)"
    with pytest.raises(ValueError, match=r"multivariate_normal: x's last axis must have length 3 "
                                         r"to match cov \(3, 3\), got shape \(2,\)"):
        tg.scipy.stats.multivariate_normal.logpdf(tg.ones(2), tg.ones(3))
    np.testing.assert_allclose(
        tg.scipy.stats.multivariate_normal.logpdf(tg.ones(3), tg.ones(3)).item(),
        scipy.stats.multivariate_normal.logpdf(np.ones(3), np.ones(3)))
