"""What tapegrad does NOT provide of NumPy's public functions, and why: the data of the
NumPy coverage test (tests/test_numpy_coverage.py) and of the page docs/numpy-coverage.md
(generated from this file by ``python docs/gen_numpy_coverage.py``).

Every public function of ``numpy`` and ``numpy.linalg`` (and the index-trick objects
``np.r_``, ``np.c_``, ...) is either provided by tapegrad (``tg.<name>``,
``tg.linalg.<name>``) or named here, exactly once, in a group with a category and a
reason. The test fails when NumPy has a name that is neither (a new NumPy function: add
it to a group, or provide it), when a name here is provided now (delete it here), and
when a name here is not NumPy's (NumPy removed it: delete it here). After editing, rerun
``python docs/gen_numpy_coverage.py`` and commit the page.

Categories:

- ``no derivative``: the result is integer, boolean, a shape or dtype, an index or a
  count, or made from shapes alone: there is nothing to differentiate.
- ``not supported yet``: differentiable, not in tapegrad yet; the reason says what to use
  meanwhile and which issue (if any) adds it.
- ``out of scope``: not array computation tapegrad should own (I/O, printing, NumPy's
  configuration, dates, memory layout).

Names are NumPy's (``numpy`` key) or ``numpy.linalg``'s (``linalg`` key).
"""

CATEGORIES = ("no derivative", "not supported yet", "out of scope")

# ---------------------------------------------------------------------------------------
# Planned: functions a part of the work in progress adds (an issue split over several
# branches lists them here so each branch's suite passes before the others land). Empty
# once they land: the coverage test then names every planned function that did not
# arrive; while it is not empty, it names the planned functions that are provided already.
# (Issue 14's lists all arrived: empty.)
# ---------------------------------------------------------------------------------------
PLANNED_BY_ISSUE_14 = {"numpy": [], "linalg": []}

# ---------------------------------------------------------------------------------------
# The groups: (category, title, reason, {"numpy": [...], "linalg": [...]})
# ---------------------------------------------------------------------------------------
GROUPS = [
    # -- no derivative ----------------------------------------------------------------
    ("no derivative", "Integer and bitwise operations",
     "Defined on integers and booleans only (bits, shifts, gcd/lcm, bit packing): integer "
     "results, nothing to differentiate.",
     {"numpy": """bitwise_and bitwise_count bitwise_invert bitwise_left_shift bitwise_not
                  bitwise_or bitwise_right_shift bitwise_xor gcd invert lcm left_shift
                  packbits right_shift unpackbits""".split()}),
    ("no derivative", "Boolean predicates",
     "The result is boolean, so its derivative is zero wherever it exists. tapegrad has the "
     "comparisons, `tg.logical_and`/`or`/`not` and (issue 14) `tg.isnan`/`isinf`/`isfinite` "
     "because masks feed `tg.where`; compute these on `t.numpy()` (or compose them from "
     "those) and use the mask the same way.",
     {"numpy": """allclose array_equal array_equiv isclose iscomplex isin isneginf isposinf
                  isreal logical_xor""".split()}),
    ("no derivative", "Indices, counts and sorting orders",
     "Integer results (positions, counts, bins, orders): piecewise constant in the values. "
     "Compute them with NumPy on `t.numpy()` and index the tensor with the result: indexing "
     "(`t[idx]`, `tg.take_along_axis`) is differentiable.",
     {"numpy": """argpartition argwhere bincount count_nonzero diag_indices diag_indices_from
                  digitize flatnonzero indices ix_ lexsort mask_indices nanargmax nanargmin
                  nonzero ravel_multi_index searchsorted tril_indices tril_indices_from
                  triu_indices triu_indices_from unravel_index""".split()}),
    ("no derivative", "Histograms",
     "Counts per bin are piecewise constant in the data (`density=True` too); the edges "
     "`histogram_bin_edges` derives from the data's range are used as constants.",
     {"numpy": "histogram histogram2d histogram_bin_edges histogramdd".split()}),
    ("no derivative", "Set operations",
     "Which elements survive depends on exact equality of values, so the result's shape "
     "changes under a perturbation that breaks a tie; as `torch.unique`, no gradient is "
     "defined. To differentiate through the selected values, index the tensor with the "
     "positions NumPy returns (`np.unique(..., return_index=True)`).",
     {"numpy": """intersect1d setdiff1d setxor1d union1d unique unique_all unique_counts
                  unique_inverse unique_values""".split()}),
    ("no derivative", "Types, shapes, storage and plans",
     "They answer a question about dtypes, shapes, storage or evaluation order (a Python "
     "value, or `einsum_path`'s contraction plan), not compute an array. A Tensor has "
     "`.shape`, `.ndim`, `.size` and `.dtype`.",
     {"numpy": """broadcast_shapes can_cast common_type einsum_path isdtype
                  isfortran isrealobj isscalar issubdtype iterable may_share_memory
                  min_scalar_type mintypecode ndim promote_types result_type shape
                  shares_memory size typename""".split()}),
    ("no derivative", "Arrays made from shapes, lengths and index grids",
     "No array input to differentiate: they build an array from a shape, a length or a "
     "function of integer indices (the windows `bartlett`, `blackman`, `hamming` and "
     "`hanning` are functions of an integer length). `tg.zeros`, `tg.ones`, `tg.empty`, "
     "`tg.full`, `tg.eye`, `tg.arange` and `tg.linspace` make tensors; for the rest, "
     "`tg.tensor(np.<function>(...))`.",
     {"numpy": """bartlett blackman fromfunction hamming hanning identity
                  mgrid ogrid tri""".split()}),
    ("no derivative", "Index expressions",
     "They build index tuples (slices), not arrays; their result indexes a tensor as it "
     "indexes an array (`t[np.s_[1:, ::2]]`).",
     {"numpy": "index_exp s_".split()}),

    # -- not supported yet --------------------------------------------------------------

    # -- out of scope -------------------------------------------------------------------
    ("out of scope", "Input and output",
     "Reading and writing files, buffers and other libraries' arrays is NumPy's job: load "
     "with NumPy, then `tg.tensor(...)`. `tg.save` / `tg.load` store tensors and state dicts "
     "(`.npz`, never pickle).",
     {"numpy": """from_dlpack frombuffer fromfile fromiter fromregex fromstring genfromtxt
                  loadtxt savetxt savez savez_compressed""".split()}),
    ("out of scope", "Printing, configuration and build information",
     "Formatting, NumPy's own settings (print options, floating-point error handling, "
     "buffer size) and information about the NumPy build: not array computation.",
     {"numpy": """array2string array_repr array_str base_repr binary_repr
                  format_float_positional format_float_scientific get_include
                  get_printoptions getbufsize geterr geterrcall info printoptions
                  set_printoptions setbufsize seterr seterrcall show_config show_runtime
                  test""".split(),
      "linalg": ["test"]}),
    ("out of scope", "Dates and business days",
     "`datetime64` and `timedelta64` values; tapegrad tensors hold floats, integers and "
     "booleans.",
     {"numpy": """busday_count busday_offset datetime_as_string datetime_data is_busday
                  isnat""".split()}),
    ("out of scope", "Conversion, memory layout and array subclasses",
     "Conversions to an ndarray (or the `np.matrix` subclass) with a given memory layout, "
     "subclass or flags. `tg.tensor` and `tg.asarray` make tensors; a tensor's memory layout is "
     "not part of its API.",
     {"numpy": """array asanyarray asarray_chkfinite ascontiguousarray asfortranarray
                  asmatrix bmat require""".split()}),
    ("out of scope", "Python-function wrappers and iterators",
     "They call a Python function per slice or per element, or iterate over arrays: write "
     "the function with tapegrad ops on the whole tensor instead (tapegrad's ops broadcast "
     "and take `axis=`).",
     {"numpy": "apply_along_axis apply_over_axes frompyfunc nested_iters".split()}),
    ("out of scope", "Floating-point representation",
     "The spacing between floats (ULP), the next representable number and the "
     "mantissa/exponent split are properties of the bit pattern, not smooth functions "
     "anyone differentiates.",
     {"numpy": "frexp nextafter spacing".split()}),
]

# ---------------------------------------------------------------------------------------
# Provided functions whose leading positional parameters are not NumPy's (the check
# test_provided_functions_take_numpys_leading_positional_parameters): each with why.
# A difference that is gone fails that test too (delete it here).
# ---------------------------------------------------------------------------------------
SIGNATURE_DIFFERENCES = {
    "numpy": {
        "eye": "`tg.eye(n, m, dtype, ...)` has no `k` (diagonal offset) as its third "
               "parameter: `tg.eye(3, 3, 1)` raises TypeError (1 is not a dtype). A core "
               "creation function; not a silent wrong result.",
        "linspace": "`tg.linspace(start, stop, num, dtype, ...)` has no `endpoint` (nor "
                    "`retstep`) as its fourth parameter: `tg.linspace(0, 1, 5, False)` raises "
                    "TypeError (False is not a dtype). A core creation function.",
        "save": "`tg.save(obj, path)` stores a tensor or a state dict (`.npz`, tapegrad's "
                "serialization), a different function from `np.save(file, arr)`: the order "
                "of object and path is PyTorch's `torch.save`.",
        "load": "`tg.load(path, device=...)` reads what `tg.save` wrote (never a pickle); "
                "`np.load`'s `mmap_mode` and `allow_pickle` do not apply.",
    },
    "linalg": {},
}
