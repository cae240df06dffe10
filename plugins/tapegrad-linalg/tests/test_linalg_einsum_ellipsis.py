"""einsum with '...' (ellipsis broadcasting) and in NumPy's sublist form: values against
np.einsum, gradients, errors."""

import numpy as np
import pytest
import tapegrad as tg
from tapegrad.testing import gradcheck, gradgradcheck

RNG = np.random.default_rng(5)

CASES = [
    ("...ij,...jk->...ik", (2, 3, 4), (2, 4, 5)),
    ("...ij,...jk", (5, 1, 2, 3), (4, 3, 2)),       # broadcast, right-aligned, implicit out
    ("...ij,jk", (2, 3, 4), (4, 2)),
    ("ij...,j...->i...", (2, 3, 4), (3, 1)),
    ("...ii->...i", (2, 3, 3)),
    ("...ii", (2, 3, 3)),                           # implicit: the ellipsis axes kept
    ("i...->...", (2, 3, 4)),
    ("...->...", (2, 3)),
    ("...,...", (2, 3), (3,)),
    ("ba...", (2, 3, 4)),                           # implicit: '...' first, then 'ab'
    ("...ij,...jk->ik", (2, 3), (3, 4)),            # an ellipsis covering no axes
    ("i ... j, j -> ... i", (2, 3, 4), (4,)),       # spaces
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_ellipsis_matches_numpy(case):
    subscripts, *shapes = case
    arrays = [RNG.standard_normal(s) for s in shapes]
    got = tg.einsum(subscripts, *[tg.tensor(a) for a in arrays])
    ref = np.einsum(subscripts, *arrays)
    assert got.shape == ref.shape
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", CASES[:5], ids=lambda c: c[0])
def test_ellipsis_gradients(case):
    subscripts, *shapes = case
    xs = tuple(tg.tensor(RNG.standard_normal(s), requires_grad=True) for s in shapes)
    assert gradcheck(lambda *a: tg.einsum(subscripts, *a), xs)
    assert gradgradcheck(lambda *a: tg.einsum(subscripts, *a), xs)


SUBLISTS = [
    ((2, 3), [0, 1], (3, 4), [1, 2], [0, 2]),
    ((2, 3), [0, 1], (3, 4), [1, 2]),                 # implicit output
    ((3, 3), [0, 0]),                                 # trace
    ((2, 3), [0, 1], [1, 0]),
    ((2, 2, 3), [Ellipsis, 0, 1], (3,), [1], [Ellipsis, 0]),
    ((2, 3), [Ellipsis, 30], (3,), [30]),             # 30 -> 'e' (0..25 are 'A'..'Z')
    ((2, 3), [26, 0]),                                # implicit order: 'A' (0) before 'a' (26)
]


@pytest.mark.parametrize("args", SUBLISTS)
def test_sublist_form_matches_numpy(args):
    arrays = {i: RNG.standard_normal(a) for i, a in enumerate(args) if isinstance(a, tuple)}
    np_args = [arrays[i] if i in arrays else a for i, a in enumerate(args)]
    tg_args = [tg.tensor(arrays[i], requires_grad=True) if i in arrays else a
               for i, a in enumerate(args)]
    got = tg.einsum(*tg_args)
    ref = np.einsum(*np_args)
    assert got.shape == ref.shape
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-12, atol=1e-12)
    got.sum().backward()
    for i in arrays:
        assert tg_args[i].grad.shape == arrays[i].shape


@pytest.mark.parametrize("subscripts, shapes, message", [
    ("...ij", [(3,)], "name 2 besides the ellipsis"),
    ("....", [(3,)], "an ellipsis is exactly '...'"),
    ("...i...", [(3, 3)], "an ellipsis is exactly '...'"),
    ("...i->i", [(2, 3)], "has no '...'"),
    ("...i,...i", [(2, 3), (4, 3)], "lengths must match or be 1"),
])
def test_ellipsis_errors_name_einsum(subscripts, shapes, message):
    with pytest.raises(ValueError, match=message) as info:
        tg.einsum(subscripts, *[tg.ones(s) for s in shapes])
    assert str(info.value).startswith("einsum: ")
    with pytest.raises(ValueError):
        np.einsum(subscripts, *[np.ones(s) for s in shapes])


def test_sublist_errors():
    with pytest.raises(ValueError, match=r"ints in \[0, 52\)"):
        tg.einsum(tg.ones(2), [52])
    with pytest.raises(ValueError, match=r"ints in \[0, 52\)"):
        tg.einsum(tg.ones(2), ["a"])
    with pytest.raises(TypeError, match="must be a list of ints"):
        tg.einsum(tg.ones(2), 0)
