"""Plugin discovery and the op registry.

pluggy is used here and only here: at import (and in ``tg.register_plugin``) the hooks of
every plugin run once and fill the op table of the engine. Op calls never come back here.

Loading rules (docs/plugin-guide.md):
* first-party plugins (the distributions in ``_FIRST_PARTY``) load first, then the others
  in name order, so a third-party plugin can never knock out a first-party one by sorting
  before it; it can replace a first-party name only with ``override=True``;
* each plugin registers as one transaction: if any of its hooks raises, or it defines a
  name another plugin already defined (without ``override=True``), nothing of it is kept
  and a ``PluginWarning`` names it and every name it lost to whom;
  ``TAPEGRAD_STRICT_PLUGINS=1`` turns that into a ``PluginError``;
* private and dunder names (``_engine``, ``__version__``) are tapegrad's own: an api may
  not export them, and no plugin may take a name the core module already has;
* ``tg.register_plugin`` at run time raises ``PluginError`` directly.
"""

from __future__ import annotations

import functools
import inspect
import os
import warnings
from importlib import metadata

import numpy as np
import pluggy

from . import _batching, _dim_keywords, _engine, hookspecs
from ._engine import Device, Op
from .function import Function

hookimpl = pluggy.HookimplMarker("tapegrad")

_PHASES = ("tapegrad_register_devices", "tapegrad_register_ops",
           "tapegrad_register_kernels", "tapegrad_api")

# Which first-party distribution provides which public name: used to say what to install
# when a name is missing, and to load first-party plugins before all others.
_FIRST_PARTY = {
    "tapegrad-elementwise": (
        "subtract multiply divide negative power exp log sqrt abs clip tanh sigmoid relu sin "
        "cos maximum minimum where sign equal not_equal less less_equal greater greater_equal "
        "logical_and logical_or logical_not square tan sinh cosh arcsin arccos arctan arcsinh "
        "arccosh arctanh arctan2 hypot sinc deg2rad radians rad2deg degrees log1p expm1 log2 "
        "log10 exp2 logaddexp logaddexp2 reciprocal cbrt fmax fmin floor ceil trunc rint round "
        "around remainder mod fmod floor_divide divmod copysign heaviside isnan isinf isfinite "
        "signbit nan_to_num absolute true_divide acos acosh asin asinh atan atan2 atanh pow "
        "positive fabs fix float_power"),
    "tapegrad-shape": (
        "sum mean max min var std prod argmax argmin reshape transpose flatten ravel getitem "
        "setitem concatenate stack split squeeze expand_dims swapaxes moveaxis copy clone "
        "tensordot outer inner kron trace diag diagonal tril triu cumsum cumprod sort argsort "
        "repeat tile roll flip fliplr flipud pad take take_along_axis put_along_axis "
        "append hstack vstack dstack column_stack row_stack array_split hsplit vsplit dsplit "
        "atleast_1d atleast_2d atleast_3d r_ c_ gradient diff any all amax amin nansum "
        "nanmean nanvar nanstd average ptp median quantile percentile nanmedian nanquantile "
        "nanpercentile "
        "convolve correlate cov corrcoef ediff1d geomspace logspace interp ldexp modf "
        "trapezoid unwrap vander "
        "concat permute_dims rollaxis matrix_transpose cumulative_sum "
        "cumulative_prod nancumsum nancumprod nanmax nanmin nanprod block broadcast_arrays "
        "choose compress delete diagflat extract insert meshgrid partition piecewise resize "
        "rot90 select trim_zeros unstack "
        "copyto fill_diagonal place put putmask"),
    "tapegrad-linalg": (
        "matmul dot einsum cross linalg linalg_cholesky linalg_cond linalg_cross linalg_det "
        "linalg_eig linalg_eigh linalg_eigvals linalg_eigvalsh linalg_inv linalg_lstsq "
        "linalg_matrix_norm linalg_matrix_power linalg_matrix_rank linalg_matrix_transpose "
        "linalg_multi_dot linalg_norm linalg_outer linalg_pinv linalg_qr linalg_slogdet "
        "linalg_solve linalg_svd linalg_svdvals linalg_tensorinv linalg_tensorsolve "
        "linalg_vecdot linalg_vector_norm "
        "poly polyadd polyder polydiv polyfit polyint polymul polysub polyval "
        "matvec vdot vecdot vecmat"),
    "tapegrad-nn": ("softmax log_softmax logsumexp cross_entropy mse_loss "
                    "binary_cross_entropy_with_logits linear nn optim data "
                    "conv1d conv2d conv3d conv_transpose1d conv_transpose2d"
                    " _standardize _rms_scale _standardize_grad _rms_scale_grad layer_norm"
                    " rms_norm group_norm batch_norm"
                    " instance_norm normalize "
                    "gelu silu mish elu selu celu leaky_relu prelu relu6 hardtanh hardsigmoid "
                    "hardswish softplus softsign logsigmoid log_sigmoid tanhshrink glu softmin "
                    "_normal_cdf "
                    "nll_loss l1_loss smooth_l1_loss huber_loss binary_cross_entropy "
                    "cosine_similarity cosine_embedding_loss margin_ranking_loss "
                    "hinge_embedding_loss pairwise_distance triplet_margin_loss "
                    "poisson_nll_loss gaussian_nll_loss"
                    " embedding masked_fill scaled_dot_product_attention"
                    " max_pool1d max_pool2d avg_pool1d avg_pool2d adaptive_avg_pool1d"
                    " adaptive_avg_pool2d adaptive_max_pool2d unfold fold pixel_shuffle"
                    " pixel_unshuffle interpolate upsample _unfold _fold _max_pool_indices"
                    " _adaptive_max_pool_indices"
                    " _standardize_backward"
                    " _rms_scale_backward"
                    " _softmax_backward"
                    " _log_softmax_backward"
                    " _minus_one_hot"
                    " _batch_moments"
                    " _channel_affine"
                    " _channel_dot"
                    " _channel_sum"),
    "tapegrad-checkpoint": "checkpoint checkpoint_sequential",
    "tapegrad-higher": "grad vjp jvp jacobian hessian hvp linearize jacfwd jacrev forward_ad",
    "tapegrad-cuda": "cuda",
    "tapegrad-distributed": "distributed",
    "tapegrad-viz": "viz",
    "tapegrad-fft": "fft",
    "tapegrad-scipy": (
        "scipy gammaln digamma polygamma gamma beta betaln erf erfc erfinv erfcinv expit "
        "logit xlogy xlog1py log_ndtr ndtr ndtri i0 i1 i0e i1e iv jn yn entr rel_entr kl_div "
        "kaiser"),
}
KNOWN_PROVIDERS = {name: dist for dist, names in _FIRST_PARTY.items() for name in names.split()}


class PluginError(RuntimeError):
    """A plugin could not be registered (conflict, bad registration, or it raised)."""


class PluginWarning(UserWarning):
    """A plugin failed to load and was skipped; the rest of tapegrad works."""


class Sample:
    """Sample inputs for the contract kit: ``Sample(x, y, axis=0)``.

    Positional values are the op's inputs (arrays, numbers), keywords its parameters.
    A plain tuple of inputs works too.

    >>> import numpy as np, tapegrad as tg
    >>> s = tg.Sample(np.ones((2, 3)), axis=1)
    >>> s.args[0].shape, s.kwargs
    ((2, 3), {'axis': 1})
    """

    def __init__(self, *args, **kwargs):
        self.args = args
        self.kwargs = kwargs

    def __repr__(self):
        shapes = [getattr(a, "shape", a) for a in self.args]
        return f"Sample({shapes}, {self.kwargs})"

    @classmethod
    def coerce(cls, sample) -> "Sample":
        if isinstance(sample, Sample):
            return sample
        if isinstance(sample, tuple):
            return cls(*sample)
        return cls(sample)


class FunctionDef:
    """A public function composed of other ops (no kernel, no VJP of its own)."""

    def __init__(self, name, fn, plugin, samples, method, differentiable, writes_into=None,
                 not_implemented=()):
        self.name = name
        self.not_implemented = tuple(not_implemented)   # as Op.not_implemented (the kit checks)
        self.fn = fn
        self.plugin = plugin
        self.samples = [Sample.coerce(s) for s in (samples or [])]
        self.method = method
        self.differentiable = differentiable
        self.writes_into = writes_into  # the argument written in place (fn returns None)

    def __repr__(self):
        return f"<tapegrad function '{self.name}' from {self.plugin}>"


def _infer_signature(name, vjp, kernels):
    """(nin, params) from the VJP's signature ``vjp(g, ans, x, y, ..., *, shape, axis=None)``.

    Positional parameters without a default are the tensor inputs; the rest (defaulted or
    keyword-only) are the op's parameters, bound in that order by extra positional args.
    """
    if vjp is not None:
        sig = inspect.signature(vjp)
        ps = list(sig.parameters.values())
        if len(ps) < 2 and not any(p.kind is p.VAR_POSITIONAL for p in ps):
            raise PluginError(f"op '{name}': the VJP must take (g, ans, *inputs), got {sig}")
        nin, params = 0, []
        for p in ps[2:]:
            if p.kind is p.VAR_POSITIONAL:
                nin = -1
            elif p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty:
                nin = nin + 1 if nin >= 0 else nin
            elif p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "aux":
                params.append(p.name)     # (`aux` is the rule's, see register_op(aux=))
        return nin, tuple(params)
    for fn in kernels.values():
        if isinstance(fn, np.ufunc):
            return fn.nin, ()
    raise PluginError(f"op '{name}' has no VJP and no ufunc kernel: pass nin= (the number of tensor inputs)")


def _check_aux(name, aux, vjp):
    """register_op's `aux`, validated: a count, and a rule that takes ``aux=``."""
    if isinstance(aux, bool) or not isinstance(aux, int) or aux < 0:
        raise PluginError(f"op '{name}': aux must be the number (an int >= 0) of auxiliary "
                          f"arrays its kernels return after the output, got {aux!r}")
    if aux and vjp is None:
        raise PluginError(f"op '{name}': aux={aux} needs a vjp (the rule that reuses them)")
    if aux:
        ps = inspect.signature(vjp).parameters.values()
        if not any(p.name == "aux" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                   and p.default is not p.empty for p in ps) \
                and not any(p.kind is p.VAR_KEYWORD for p in ps):
            raise PluginError(f"op '{name}': aux={aux}, so its vjp must take a keyword "
                              f"argument aux=None (the auxiliary arrays, or None: recompute)")
    return aux


class Registry:
    """What a plugin's hooks receive: ``registry.register_op(...)`` and friends.

    Registrations are staged and committed together when the plugin's hooks all succeed.
    """

    def __init__(self, loader: "_Loader", plugin: str):
        self._loader = loader
        self.plugin = plugin
        self.ops: dict[str, Op] = {}
        self.functions: dict[str, FunctionDef] = {}
        self.kernels: list = []
        self.devices: list = []
        self.api: dict = {}
        self.overrides: set = set()
        self.methods: dict[str, object] = {}
        self.unavailable: list = []

    # -- ops ---------------------------------------------------------------------------
    def register_op(self, name, kernels, vjp=None, samples=None, *, differentiable=None,
                    nin=None, params=None, jvp=None, method=None, seq_input=False, view=False,
                    twice_differentiable=True, save_inputs=True, save_ans=True, doc=None,
                    not_implemented=(), override=False, aux=0, batch=None, complex=False):
        """Define op `name`.

        kernels: {device name: fn(*arrays, **params) -> array}.
        vjp: vjp(g, ans, *inputs, **params) -> one gradient (Tensor or None) per input,
            written with tapegrad ops (so it is device-agnostic and differentiable).
            Gradients may have the broadcast shape: the engine sums them back to each
            input's shape. None: the op is not differentiable (comparisons).
        samples: inputs for the contract kit (tuples or tg.Sample).
        differentiable: indexes of inputs that get gradients (default: all).
        nin / params: tensor inputs and the names extra positional arguments bind to;
            inferred from the VJP signature (inputs without defaults, then parameters).
        method: also bind as Tensor.<name> (default True when that name is free), a
            different method name, or a function to install as the method.
        seq_input: inputs arrive as one sequence (``tg.concatenate([a, b], axis=0)``).
        view: the kernel's output may share input 0's storage.
        save_inputs / save_ans: which values the VJP reads (True, or one bool per input);
            values it does not read are not kept alive and not version-checked.
        twice_differentiable: False if the VJP is not itself differentiable: gradients
            it computes under create_graph then raise, naming the op, when differentiated
            again (instead of a silent zero).
        not_implemented: indexes of inputs outside `differentiable` whose derivative exists
            but the rule does not compute (an order of a Bessel function): a tensor there
            that requires grad raises NotImplementedError at the call, instead of silently
            getting no gradient. (Masks and indices, whose derivative is 0, need nothing.)
        jvp: forward-mode rule ``jvp(t, ans, *inputs, **params)``: `t` holds one
            tangent per input (None where it has none); returns the output's tangent (in
            ans's shape, or one that broadcasts to it), written with tapegrad ops (so that
            forward-over-reverse and nested forward levels work). ``jvp="linear"``: the op
            is linear in its differentiable inputs taken together (reshape, sum,
            concatenate, where's branches, take's values), so its tangent is the op itself
            applied to the tangents (zeros where an input has none; the other inputs --
            indices, masks -- as they are). The contract kit checks it.
        batch: vmap's batching rule ``batch(inputs, batched, **params)``: `inputs` are the
            per-example (physical) values, with the vmapped axis first where
            ``batched[i]`` (the others are as the caller passed them); returns the
            output with the vmapped axis first, written with tapegrad ops.
            ``batch="elementwise"``: the op broadcasts its inputs and works element by
            element (NumPy's ufuncs); ``batch="reduce"``: the op reduces its one input
            over ``axis`` (None: all axes) with ``keepdims``. None: vmap runs the op once
            per example and stacks (exact, slow, a one-time BatchingFallbackWarning).
            See docs/plugin-guide.md (the op definition, ``batch``) and
            tapegrad/_batching.py.
        aux: the number of auxiliary arrays the kernels return after the output,
            ``kernel(...) -> (out, a1, ..., a_aux)`` (or the output alone: the rule then
            gets aux=None): intermediates of the forward that the
            rule may reuse (an inverse std, a softmax). The VJP then takes a keyword
            ``aux``: a tuple of constant tensors when the rule runs unrecorded (a plain
            backward), and None when it is recorded (create_graph=True, tg.compile), where
            it must recompute them from its inputs with tapegrad ops -- the arrays are
            constants, so a rule differentiated through them would be wrong in the inputs
            they depend on. The aux arrays must be new arrays (not the output or an input,
            nor views of them). See docs/plugin-guide.md, "Reusing forward intermediates".
        complex: True says the VJP, JVP and batching rule are correct on complex64/
            complex128 inputs under PyTorch's convention (docs/autograd.md, "Complex
            numbers": the rule gets the output's cotangent g = dL/dRe + i dL/dIm and
            returns the inputs'; a holomorphic f's VJP is ``g * conj(f'(z))``, its JVP
            ``f'(z) * t``); the rules may return a complex gradient for a real input (the
            engine takes its real part). The contract kit then checks the op with complex
            samples. False (the default): a complex input that requires grad (or carries a
            tangent), or a complex result needing one, raises TypeError naming the op (it
            computes as NumPy does when no gradient is needed), so an op's real-only rule
            is never applied silently to complex values.

        An op that takes ``axis``/``keepdims`` (in `params`, the VJP's or a kernel's
        signature) and no ``dim``/``keepdim`` takes PyTorch's ``dim=``/``keepdim=`` too,
        renamed before the kernel sees them (Note: [dim= and keepdim=], _dim_keywords.py).
        """
        if not isinstance(name, str) or not name.isidentifier():
            raise PluginError(f"op name must be an identifier, got {name!r}")
        if not isinstance(kernels, dict) or not kernels:
            raise PluginError(f"op '{name}': kernels must be a non-empty dict {{device: fn}}")
        for dev, fn in kernels.items():
            if not callable(fn):
                raise PluginError(f"op '{name}': kernel for '{dev}' is not callable")
        if vjp is not None and not callable(vjp):
            raise PluginError(f"op '{name}': vjp must be callable or None")
        aux = _check_aux(name, aux, vjp)
        if vjp is None and nin is not None:
            inferred_nin, inferred_params = nin, ()
        else:
            inferred_nin, inferred_params = _infer_signature(name, vjp, kernels)
        if seq_input:
            inferred_nin = -1
        nin = inferred_nin if nin is None else nin
        params = inferred_params if params is None else tuple(params)
        if save_inputs is not True and save_inputs is not None:
            save_inputs = tuple(bool(s) for s in save_inputs)
        if vjp is not None and not twice_differentiable:
            vjp = _guard_vjp(name, vjp)     # see Note: [twice_differentiable=False]
        if isinstance(jvp, str):
            if jvp != "linear":
                raise PluginError(f"op '{name}': jvp must be callable, \"linear\" or None, "
                                  f"got {jvp!r}")
            jvp = _linear_jvp(name, differentiable, bool(seq_input))
        elif jvp is not None and not callable(jvp):
            raise PluginError(f"op '{name}': jvp must be callable, \"linear\" or None")
        op = Op(name, self.plugin, dict(kernels), vjp, jvp, nin, bool(seq_input), params,
                differentiable, bool(view), bool(twice_differentiable),
                [Sample.coerce(s) for s in (samples or [])], doc or "", save_inputs,
                bool(save_ans), tuple(not_implemented), aux, _batching.check_rule(name, batch),
                bool(complex))
        self._stage(self.ops, name, op, override)
        self.methods[name] = method
        return op

    def register_function(self, name, fn, *, samples=None, method=None, differentiable=None,
                          override=False, writes_into=None, not_implemented=()):
        """Define a public function composed of other ops (``tg.<name>``).

        Its samples are gradchecked by the contract kit like an op's. `writes_into`: the
        position of the argument the function writes into in place, returning None (as
        np.copyto, np.put); the kit then checks "write into a copy of it, return the copy",
        and NumPy's function of that name called on a Tensor dispatches to it.
        `not_implemented`: as register_op's (the function itself must refuse a tensor there
        that requires grad; the kit checks that it does). A function that takes
        ``axis``/``keepdims`` and no ``dim``/``keepdim`` is published wrapped so that it
        takes PyTorch's names too, as ops do (`_dim_keywords.wrap_function`).
        """
        if not callable(fn):
            raise PluginError(f"function '{name}' is not callable")
        fn = _dim_keywords.wrap_function(name, fn)
        fdef = FunctionDef(name, fn, self.plugin, samples, method, differentiable, writes_into,
                           not_implemented)
        self._stage(self.functions, name, fdef, override)
        self.methods[name] = method
        return fdef

    def register_kernel(self, op, device, fn, *, override=False):
        """Add the kernel of op `op` (defined by any plugin) for device `device`."""
        if not callable(fn):
            raise PluginError(f"kernel for '{op}' on '{device}' is not callable")
        self.kernels.append((op, device, fn, override))

    def mark_device_unavailable(self, name, reason):
        """Say why this plugin cannot provide device `name` here (no GPU, no driver, ...):
        ``device=name`` then raises a RuntimeError with that reason."""
        self.unavailable.append((str(name), str(reason)))

    def register_device(self, device, *, default=False, override=False):
        if not isinstance(device, Device):
            raise PluginError(f"register_device needs a tapegrad.Device, got {type(device).__name__}")
        self.devices.append((device, default, override))

    def _stage(self, table, name, obj, override):
        if name in self.ops or name in self.functions:
            raise PluginError(f"plugin '{self.plugin}' registers '{name}' twice")
        table[name] = obj
        if override:
            self.overrides.add(name)


class _Loader:
    """Owns the pluggy manager and everything committed to the engine."""

    def __init__(self):
        self.pm = pluggy.PluginManager("tapegrad")
        self.pm.add_hookspecs(hookspecs)
        self.namespace = None
        self.tensor_cls = None
        self.functions: dict[str, FunctionDef] = {}
        self.owner: dict[str, str] = {}        # public name -> plugin that defined it
        self.kernel_owner: dict = {}           # (op, device) -> plugin
        self.pending_kernels: list = []        # (op, device, fn, plugin, override) awaiting op
        self.attached: dict = {}               # (op, device) -> that entry, once attached
        self.plugins: dict[str, object] = {}
        self.failed: dict[str, str] = {}
        self.methods: dict[str, str] = {}      # method name -> public name it binds
        self.core_names: set = set()
        self.shadowed: dict[str, list] = {}    # name -> [(plugin, previous definition)]
        self.deferred: list = []               # (name, module) still importing at load time

    # -- loading ---------------------------------------------------------------------
    def load(self, namespace, tensor_cls, core_plugin):
        # NOTE: resumable. A strict-mode failure stops `import tapegrad` half way; the next
        # import calls this again on the same namespace (see tapegrad._load) and goes on
        # from the plugin that failed, skipping those already registered.
        if self.namespace is None:
            self.namespace = namespace
            self.tensor_cls = tensor_cls
            self.core_names = set(vars(namespace))      # private and dunder names included
            self.register(core_plugin, "tapegrad", strict=True)
        deferred = {n for n, _o in self.deferred}
        for name, ep in _entry_points_in_load_order():
            if name in self.plugins or name in deferred:
                continue
            self.failed.pop(name, None)
            try:
                obj = ep.load()
            except Exception as exc:  # noqa: BLE001 - any import failure is reported
                self._report(name, f"import of {ep.value!r} failed: {type(exc).__name__}: {exc}")
                continue
            if _initializing(obj):
                # The plugin module itself is being imported and imported tapegrad (a program
                # that starts with `import tapegrad_x.ops`): its hooks do not exist yet.
                self.deferred.append((name, obj))
                continue
            self._register_entry_point(obj, name)

    def _register_entry_point(self, obj, name):
        try:
            self.register(obj, name, strict=False)
        except PluginError:
            if _strict():
                raise

    def load_deferred(self):
        """Register plugins whose module was still importing at load time. Runs only when a
        name is missing (never on the per-op path); returns whether it registered any."""
        ready = [(n, o) for n, o in self.deferred if not _initializing(o)]
        if not ready:
            return False
        self.deferred = [(n, o) for n, o in self.deferred if _initializing(o)]
        for name, obj in ready:
            self._register_entry_point(obj, name)
        return True

    def _report(self, name, cause):
        self.failed[name] = cause
        msg = f"tapegrad plugin '{name}' was not loaded: {cause}"
        if _strict():
            raise PluginError(msg)
        warnings.warn(msg + " (set TAPEGRAD_STRICT_PLUGINS=1 to make this an error)",
                      PluginWarning, stacklevel=3)

    def register(self, obj, name=None, strict=True):
        name = name or getattr(obj, "__name__", None) or type(obj).__name__
        if name in self.plugins or self.pm.is_registered(obj):
            raise PluginError(f"plugin '{name}' is already registered")
        try:
            self.pm.register(obj, name=name)
        except ValueError as exc:
            raise PluginError(f"plugin '{name}' could not be registered: {exc}") from exc
        try:
            reg = self._collect(obj, name)
            self._check_conflicts(reg)
        except Exception as exc:
            self.pm.unregister(obj)
            cause = f"{type(exc).__name__}: {exc}" if not isinstance(exc, PluginError) else str(exc)
            if strict:
                raise PluginError(f"plugin '{name}' could not be registered: {cause}") from exc
            self._report(name, cause)
            raise PluginError(cause) from exc
        self._commit(reg)
        self.plugins[name] = obj
        return name

    def _collect(self, obj, name) -> Registry:
        reg = Registry(self, name)
        for phase in _PHASES:
            impls = [i for i in getattr(self.pm.hook, phase).get_hookimpls() if i.plugin is obj]
            for impl in impls:
                kwargs = {"registry": reg}
                result = impl.function(*[kwargs[a] for a in impl.argnames])
                if phase == "tapegrad_api":
                    if result is None:
                        continue
                    if not isinstance(result, dict):
                        raise PluginError(f"tapegrad_api of '{name}' must return a dict, got {type(result).__name__}")
                    for key, value in result.items():
                        if key in reg.api:
                            raise PluginError(f"plugin '{name}' exports '{key}' twice")
                        reg.api[key] = value
        return reg

    def _check_conflicts(self, reg: Registry):
        """Raise one PluginError listing every name `reg` cannot take, and from whom."""
        problems = []
        devices = _engine.devices_table()
        for device, _default, override in reg.devices:
            if device.name in devices and not override:
                problems.append(
                    f"device '{device.name}' is registered by both "
                    f"'{self.owner.get('device:' + device.name)}' and '{reg.plugin}' "
                    f"(pass override=True to replace it)")
        for name in reg.api:
            if name.startswith("_"):
                problems.append(
                    f"tapegrad_api of '{reg.plugin}' exports '{name}': private and dunder "
                    f"names are tapegrad's own and cannot be exported")
        lost = {}                                        # owner -> names reg cannot take
        for name in list(reg.ops) + list(reg.functions) + list(reg.api):
            if name.startswith("_") and (name in self.core_names or name.endswith("__")):
                if name in reg.ops or name in reg.functions:
                    problems.append(
                        f"'{name}' is a private name of tapegrad itself; plugin "
                        f"'{reg.plugin}' cannot define it, not even with override=True")
                continue
            taken = self.owner.get(name)
            if taken is None and name in self.core_names:
                taken = "tapegrad"
            if taken is not None and name not in reg.overrides:
                lost.setdefault(taken, []).append(name)
        for taken, names in lost.items():
            quoted = ", ".join(f"'{n}'" for n in names)
            verb = "is" if len(names) == 1 else "are"
            problems.append(
                f"{quoted} {verb} defined by both '{taken}' and '{reg.plugin}' (pass "
                f"override=True in '{reg.plugin}' to replace {'it' if len(names) == 1 else 'them'})")
        for op, device, _fn, override in reg.kernels:
            taken = self.kernel_owner.get((op, device))
            if taken is not None and not override:
                problems.append(
                    f"kernel for '{op}' on '{device}' is registered by both '{taken}' and "
                    f"'{reg.plugin}' (pass override=True to replace it)")
        waiting = {(op, dev): (plugin, override)
                   for op, dev, _fn, plugin, override in self.pending_kernels}
        lost_names = {n for names in lost.values() for n in names}
        for op_name, op in reg.ops.items():
            if op_name in lost_names:
                continue                     # already reported: the whole op conflicts
            for device in op.kernels:
                taken = self.kernel_owner.get((op_name, device))
                if taken is not None and op_name not in reg.overrides and taken != reg.plugin:
                    problems.append(
                        f"kernel for '{op_name}' on '{device}' is registered by both '{taken}' "
                        f"and '{reg.plugin}'")
                # A kernel another plugin registered before this op existed, for a device
                # the op brings its own kernel for: one of them must say override=True.
                early = waiting.get((op_name, device))
                if early is not None and not early[1] and op_name not in reg.overrides:
                    problems.append(
                        f"kernel for '{op_name}' on '{device}' is registered by both "
                        f"'{early[0]}' and '{reg.plugin}' (pass override=True to replace it)")
        if problems:
            raise PluginError("; ".join(problems))

    def _commit(self, reg: Registry):
        for name, reason in reg.unavailable:
            _engine.set_device_unavailable(name, reason)
            self.owner["unavailable:" + name] = reg.plugin
        for device, default, _override in reg.devices:
            _engine.set_device_unavailable(device.name, None)
            _engine.install_device(device, default)
            self.owner["device:" + device.name] = reg.plugin
        for name in list(reg.ops) + list(reg.functions) + list(reg.api):
            if name in self.owner or name in self.core_names:
                # An explicit override: remember what it replaces, Tensor methods included,
                # so that unregistering the plugin puts back both tg.<name> and t.<name>().
                previous = _engine.ops_table().get(name) or self.functions.get(name) \
                    or getattr(self.namespace, name, None)
                methods = {m: vars(self.tensor_cls).get(m)
                           for m, pub in self.methods.items() if pub == name}
                self.shadowed.setdefault(name, []).append(
                    (self.owner.get(name), previous, methods))
        for name, op in reg.ops.items():
            old = _engine.ops_table().get(name)
            if old is not None:
                for dev, fn in old.kernels.items():
                    if self.kernel_owner.get((name, dev)) != self.owner.get(name):
                        op.kernels.setdefault(dev, fn)   # keep kernels other plugins added
            _engine.install_op(op)
            for dev in op.kernels:
                self.kernel_owner.setdefault((name, dev), reg.plugin)
            self._publish(name, op, reg)
        for name, fdef in reg.functions.items():
            self.functions[name] = fdef
            self._publish(name, fdef.fn, reg)
        for name, value in reg.api.items():
            self.owner[name] = reg.plugin
            setattr(self.namespace, name, value)
        # An op defined with override=True keeps its own kernels over ones waiting for it.
        self.pending_kernels = [
            k for k in self.pending_kernels
            if not (k[0] in reg.overrides and k[0] in reg.ops and k[1] in reg.ops[k[0]].kernels
                    and not k[4])]
        self.pending_kernels.extend((op, dev, fn, reg.plugin, o) for op, dev, fn, o in reg.kernels)
        self._attach_pending_kernels()

    def _publish(self, name, obj, reg):
        self.owner[name] = reg.plugin
        setattr(self.namespace, name, obj)
        method = reg.methods.get(name)
        if method is False:
            return
        if callable(method) and not isinstance(method, (str, bool)):
            mname, mobj, explicit = name, method, True
        elif isinstance(method, str):
            mname, mobj, explicit = method, obj, True
        else:
            mname, mobj, explicit = name, obj, method is True
        if not isinstance(mobj, Op) and not hasattr(mobj, "__get__"):
            mobj = _as_method(mobj)
        existing = self.methods.get(mname)
        if existing is None and mname in _tensor_attributes(self.tensor_cls):
            if explicit:
                raise PluginError(f"method Tensor.{mname} of '{name}' would replace a core attribute")
            return
        setattr(self.tensor_cls, mname, mobj)
        self.methods[mname] = name

    def _attach_pending_kernels(self):
        table = _engine.ops_table()
        keep = []
        for entry in self.pending_kernels:
            op_name, device, fn, plugin, _override = entry
            op = table.get(op_name)
            if op is None:
                keep.append(entry)
                continue
            op.kernels[device] = fn
            self.kernel_owner[(op_name, device)] = plugin
            self.attached[(op_name, device)] = entry
        self.pending_kernels = keep

    def unregister(self, name):
        """Remove a plugin registered at run time, with its ops, functions and names."""
        obj = self.plugins.pop(name, None)
        if obj is None:
            raise PluginError(f"no plugin named '{name}' is registered")
        self.pm.unregister(obj)
        table = _engine.ops_table()
        # Kernels it registered that still wait for their op go with it (else they would
        # silently replace the kernel of whichever plugin defines that op later).
        self.pending_kernels = [k for k in self.pending_kernels if k[3] != name]
        for pub, owner in list(self.owner.items()):
            if owner != name:
                continue
            del self.owner[pub]
            if pub.startswith("device:"):
                _engine.uninstall_device(pub[len("device:"):])
                continue
            if pub.startswith("unavailable:"):
                _engine.set_device_unavailable(pub[len("unavailable:"):], None)
                continue
            # Kernels other plugins added to this op wait again for an op of that name.
            for key, entry in list(self.attached.items()):
                if key[0] == pub:
                    del self.attached[key]
                    self.kernel_owner.pop(key, None)
                    if entry[3] != name:
                        self.pending_kernels.append(entry)
            _engine.uninstall_op(pub)
            self.functions.pop(pub, None)
            if hasattr(self.namespace, pub):
                delattr(self.namespace, pub)
            if self.shadowed.get(pub):
                self._restore(pub, *self.shadowed[pub].pop())
        for mname, pub in list(self.methods.items()):
            if pub not in self.owner:
                del self.methods[mname]
                if mname in vars(self.tensor_cls):
                    delattr(self.tensor_cls, mname)
        for key, owner in list(self.kernel_owner.items()):
            if owner == name:
                del self.kernel_owner[key]
                self.attached.pop(key, None)
                op = table.get(key[0])
                if op is not None:
                    op.kernels.pop(key[1], None)
        self._attach_pending_kernels()       # onto the ops that overrides gave back

    def _restore(self, name, owner, previous, methods):
        if owner is not None:               # None: a name of the core module itself
            self.owner[name] = owner
        if isinstance(previous, Op):
            _engine.install_op(previous)
        elif isinstance(previous, FunctionDef):
            self.functions[name] = previous
            previous = previous.fn
        setattr(self.namespace, name, previous)
        for mname, pub in list(self.methods.items()):
            if pub == name:                 # the overriding plugin's methods
                del self.methods[mname]
                if mname in vars(self.tensor_cls):
                    delattr(self.tensor_cls, mname)
        for mname, attr in methods.items():
            if attr is not None:
                setattr(self.tensor_cls, mname, attr)
                self.methods[mname] = name


# Note: [twice_differentiable=False]
# An op whose VJP is not itself differentiable (it computes on arrays with NumPy, or drops
# a dependence on an input) registers with twice_differentiable=False. Its rule then runs
# wrapped: when it runs with recording on -- backward(create_graph=True), tg.grad(...,
# create_graph=True), and the transforms of tapegrad-higher -- every gradient it returns
# passes through an identity node that depends on the rule's inputs (g, ans, the saved
# inputs) and whose own gradient raises, naming the op. The first derivative is
# unaffected; differentiating it again raises instead of returning a silent zero
# (PyTorch's DelayedError). Without recording the wrapper costs one check. The engine
# needs no change: it already runs rules with recording on exactly when create_graph.

def _linear_jvp(name, differentiable, seq_input):
    """The JVP of an op linear in its differentiable inputs: the op applied to the tangents.

    An input outside `differentiable` (an index, a mask) is passed as it is; a
    differentiable one without a tangent becomes zeros of its shape (the op then adds
    nothing for it, exactly as the derivative says).
    """
    def linear_jvp(t, ans, *inputs, **params):
        op = _engine.lookup(name)
        # NOTE: parameters may arrive positionally after the tensor inputs (the contract
        # kit passes a sample's as they are): they are passed on, never zeroed
        if seq_input:
            n = len(inputs)
            while n and not isinstance(inputs[n - 1], _engine.TensorBase) and t[n - 1] is None:
                n -= 1
        else:
            n = len(inputs) if op.nin < 0 else min(op.nin, len(inputs))
        args = []
        for i, (ti, x) in enumerate(zip(t[:n], inputs[:n])):
            if differentiable is not None and i not in differentiable:
                args.append(x)
            elif ti is None:
                # a number or array constant: its zero as a constant (not every device's
                # zeros_like kernel takes a Python number)
                args.append(_engine.lookup("zeros_like")(x) if isinstance(x, _engine.TensorBase)
                            else x * 0)
            else:
                args.append(ti)
        rest = inputs[n:]
        return op(args, *rest, **params) if seq_input else op(*args, *rest, **params)
    linear_jvp.__qualname__ = linear_jvp.__name__ = f"{name}_linear_jvp"
    linear_jvp.is_linear = True
    return linear_jvp


def _guard_vjp(name, vjp):
    """`vjp`, whose gradients raise when differentiated (see the Note above)."""
    @functools.wraps(vjp)          # keeps the signature that _infer_signature reads
    def guarded(g, ans, *inputs, **params):
        grads = vjp(g, ans, *inputs, **params)
        if not _engine.is_grad_enabled():
            return grads
        sources = (g, ans) + inputs
        if isinstance(grads, (tuple, list)):
            return tuple(_delay_error(name, gi, sources) for gi in grads)
        return _delay_error(name, grads, sources)
    return guarded


def _delay_error(name, grad, sources):
    if grad is None:
        return None
    if not isinstance(grad, _engine.TensorBase):
        g = sources[0]
        grad = _engine.new_tensor(g.device.asarray(grad), g.device)
    return NotTwiceDifferentiable.apply(grad, name, *sources)


class NotTwiceDifferentiable(Function):
    """Identity on a gradient that an op with ``twice_differentiable=False`` returned under
    create_graph; its own gradient raises. The other arguments (g, ans, the rule's inputs)
    only connect it to what the gradient depends on, so differentiating the gradient
    reaches it."""

    replay_backward = True          # it raises, whatever the values

    @staticmethod
    def forward(ctx, grad, op_name, *sources):
        ctx.op_name = op_name
        return grad

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError(
            f"'{ctx.op_name}' is not twice differentiable: its gradient rule is not itself "
            f"differentiable (the op is registered with twice_differentiable=False), so a "
            f"gradient computed through it with create_graph=True cannot be differentiated "
            f"again. Second and higher derivatives (tg.grad(..., create_graph=True) twice, "
            f"tg.hessian, tg.hvp, tg.jvp) need a differentiable rule for '{ctx.op_name}'.")


def _as_method(fn):
    def method(self, *args, **kwargs):
        return fn(self, *args, **kwargs)
    method.__name__ = getattr(fn, "__name__", "method")
    method.__doc__ = getattr(fn, "__doc__", None)
    return method


def _tensor_attributes(cls):
    names = set()
    for klass in cls.__mro__:
        if klass is object:
            continue
        names.update(vars(klass))
    return names


def _entry_points_in_load_order():
    """(plugin name, entry point) pairs: first-party distributions first, then the others,
    each group in name order (see the loading rules at the top of this module)."""
    found = []
    for ep in metadata.entry_points(group="tapegrad"):
        dist = ep.dist.name if ep.dist is not None else None
        found.append((dist or ep.name, ep))
    return sorted(found, key=lambda item: (item[0] not in _FIRST_PARTY, item[0], item[1].name))


def _initializing(obj):
    spec = getattr(obj, "__spec__", None)
    return bool(getattr(spec, "_initializing", False))


def _strict():
    return os.environ.get("TAPEGRAD_STRICT_PLUGINS", "") not in ("", "0")


LOADER = _Loader()


def register_plugin(plugin, name=None):
    """Register a plugin object (module or instance with ``@tg.hookimpl`` functions) now.

    Its ops become ``tg.<name>`` immediately. Raises ``PluginError`` on a conflict.

    >>> import numpy as np, tapegrad as tg
    >>> class Twice:
    ...     @tg.hookimpl
    ...     def tapegrad_register_ops(self, registry):
    ...         registry.register_op("twice_doc", kernels={"cpu": lambda x: 2 * x},
    ...                              vjp=lambda g, ans, x: (g + g,),
    ...                              samples=[(np.random.randn(3),)])
    >>> name = tg.register_plugin(Twice(), name="twice-doc")
    >>> x = tg.tensor([3.0], requires_grad=True)
    >>> tg.twice_doc(x).backward(); x.grad.item()
    2.0
    >>> tg.unregister_plugin("twice-doc")
    """
    return LOADER.register(plugin, name, strict=True)


def unregister_plugin(name):
    """Remove a plugin registered with ``register_plugin`` (its ops and names go too)."""
    LOADER.unregister(name)


class RegistryView:
    """Read-only view of what is loaded: ``tg.registry()``."""

    @property
    def ops(self) -> dict:
        return dict(_engine.ops_table())

    @property
    def functions(self) -> dict:
        return dict(LOADER.functions)

    @property
    def devices(self) -> dict:
        return dict(_engine.devices_table())

    @property
    def plugins(self) -> list:
        return list(LOADER.plugins)

    @property
    def failed(self) -> dict:
        return dict(LOADER.failed)

    def plugin_name(self, plugin) -> str | None:
        return LOADER.pm.get_name(plugin)

    def __repr__(self):
        return (f"<tapegrad registry: {len(self.ops)} ops, {len(self.functions)} functions, "
                f"devices {sorted(self.devices)}, plugins {self.plugins}>")


def registry() -> RegistryView:
    """What is loaded: ops, functions, devices, plugins and failures.

    >>> import tapegrad as tg
    >>> "add" in tg.registry().ops
    True
    """
    LOADER.load_deferred()
    return RegistryView()

