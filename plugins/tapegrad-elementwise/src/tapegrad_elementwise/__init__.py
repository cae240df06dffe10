"""tapegrad-elementwise: NumPy's elementwise math for tapegrad, with gradients.

Installing this distribution is all it takes: tapegrad finds the module
``tapegrad_elementwise.ops`` through the entry-point group ``tapegrad`` and registers
its ops when it is imported. They are then ``tg.<name>(...)`` and ``t.<name>(...)``,
and the operators ``-  *  /  **  unary-  abs()  ==  !=  <  <=  >  >=`` dispatch to them.

Differentiable: subtract, multiply, divide, negative, power, square, sqrt, abs, sign,
clip, exp, log, sin, cos, tanh, sigmoid, relu, maximum, minimum, where (in x and y), and
NumPy's other elementwise functions (module ``ufuncs``): tan, sinh, cosh, arcsin, arccos,
arctan, arcsinh, arccosh, arctanh, arctan2, hypot, sinc, deg2rad, radians, rad2deg,
degrees, log1p, expm1, log2, log10, exp2, logaddexp, logaddexp2, reciprocal, cbrt, fmax,
fmin, floor, ceil, trunc, rint, round, remainder (``%``), fmod, floor_divide (``//``),
copysign, heaviside, nan_to_num; the aliases absolute, true_divide, mod, around and
``divmod``; and (module ``aliases``) acos, acosh, asin, asinh, atan, atan2, atanh, pow,
positive, fabs, fix, float_power. Not differentiable (bool results): equal, not_equal,
less, less_equal, greater, greater_equal, logical_and, logical_or, logical_not, isnan,
isinf, isfinite, signbit. Complex numbers (module ``complex_ops``): conj/conjugate, imag,
angle, complex, real_if_close, iscomplexobj (``real`` is tapegrad's own). The gradients of relu, tanh, sigmoid, sqrt, abs, square, sin
and cos are also ops (relu_backward, ..., cos_backward: one call each in backward).
(``add`` is tapegrad's own.)

>>> import tapegrad as tg
>>> x = tg.tensor([-1.0, 0.5, 2.0], requires_grad=True)
>>> y = tg.maximum(x, 0.0) * tg.exp(x - 2.0)
>>> y.backward(tg.ones(3))
>>> x.grad.numpy().round(4)
array([0.    , 0.3347, 3.    ])
"""

# NOTE: import tapegrad before anything of this package: tapegrad loads its plugins when
# it is first imported, and that import must not start from inside ``ops`` (a half-run
# ops module would register no ops). Importing it here makes ``import
# tapegrad_elementwise.ops`` safe as the very first import of a program.
import tapegrad as _tapegrad  # noqa: F401

__version__ = "0.1.0"

OPS = (
    "subtract", "multiply", "divide", "negative", "power", "square", "sqrt", "abs", "sign",
    "clip", "exp", "log", "sin", "cos", "tanh", "sigmoid", "relu", "maximum", "minimum",
    "where", "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
    "logical_and", "logical_or", "logical_not",
    # ufuncs
    "tan", "sinh", "cosh", "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh",
    "arctan2", "hypot", "sinc", "deg2rad", "radians", "rad2deg", "degrees", "log1p", "expm1",
    "log2", "log10", "exp2", "logaddexp", "logaddexp2", "reciprocal", "cbrt", "fmax", "fmin",
    "floor", "ceil", "trunc", "rint", "round", "remainder", "fmod", "floor_divide",
    "copysign", "heaviside", "isnan", "isinf", "isfinite", "signbit", "nan_to_num",
    # the gradients of relu, tanh, sigmoid, sqrt, abs, square, sin and cos as single ops
    "relu_backward",
    "tanh_backward",
    "sigmoid_backward",
    "sqrt_backward",
    "abs_backward",
    "square_backward",
    "sin_backward",
    "cos_backward",
    # complex numbers (module ``complex_ops``)
    "conj", "imag", "angle", "complex",
)
"""The ops this plugin registers, in the order of the list above."""

FUNCTIONS = ("around", "mod", "divmod", "absolute", "true_divide",
             # aliases (module ``aliases``)
             "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "pow", "positive",
             "fabs", "fix", "float_power",
             # complex numbers (module ``complex_ops``)
             "conjugate", "real_if_close", "iscomplexobj")
"""Its functions: NumPy's aliases (the same op under a second name: ``tg.mod is
tg.remainder``) and ``divmod``."""
