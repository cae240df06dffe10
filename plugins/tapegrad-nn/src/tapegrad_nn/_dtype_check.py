"""The dtype check of the nn ops that combine an input with parameters (PyTorch's rule).

``linear``, ``conv2d``, ``layer_norm``, ``prelu``, the recurrent cells... refuse a
float32 input with float64 parameters (or the reverse) instead of letting NumPy promote
the result to float64: a float32 model that silently computes in float64 is twice as
slow and returns another dtype than its parameters, and a float64 check that feeds a
float32 layer loses precision unnoticed. PyTorch raises RuntimeError; tapegrad raises
TypeError (a wrong argument type, as elsewhere in tapegrad). Integer and bool inputs are
refused too (torch has no integer kernels for these layers). Plain NumPy ops (``tg.matmul``,
``+``) keep NumPy's promotion.

NOTE: a dtype comparison per operand, in the Python entry of each op (never a kernel or
an extra op): the cost is a few attribute reads per call.
"""

from __future__ import annotations


def check_float_operands(op, input, *params, input_name="input"):
    """Raise TypeError unless `input` is floating point (or complex) and every parameter
    in `params` (``(name, tensor-or-None)`` pairs) has its dtype. Parameters without a
    dtype (None, Python numbers and lists) are skipped; so is an input without one."""
    dtype = getattr(input, "dtype", None)
    if dtype is None:
        return
    if dtype.kind not in "fc":
        raise TypeError(f"{op}: {input_name} must be floating point, got {dtype} (as in "
                        f"PyTorch; convert it: x.astype(tg.get_default_dtype()))")
    for name, p in params:
        pdtype = getattr(p, "dtype", None)
        if pdtype is not None and pdtype != dtype:
            raise TypeError(f"{op}: {input_name} is {dtype} but {name} is {pdtype}; "
                            f"the dtypes must match, as in PyTorch (convert one: "
                            f"x.astype(tg.{pdtype}) or layer.to(tg.{dtype}))")
