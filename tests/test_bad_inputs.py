"""Every bad input the documentation lists, as data: each case runs here and must raise
the expected exception with a message matching its pattern.

The same list generates the table docs/bad-inputs.md (``python docs/gen_bad_inputs.py``):
the generator runs each case and writes down the exception and the message it really
raised, and ``test_bad_inputs_table_is_current`` fails when the committed page differs,
so the page cannot go stale. To add a case, append a ``Case`` below and rerun the
generator.

A case is code, executed in a namespace holding ``tg``, ``np``, ``os``, ``json``, ``tmp``
(a fresh temporary directory) and the helpers defined in this module (``FakePlugin``);
``setup`` must run cleanly, ``code`` must raise, and ``cleanup`` (if any) runs after it
whatever happened.
"""

import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import tapegrad as tg

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Case:
    area: str          # the distribution that raises: tapegrad (core), tapegrad-shape, ...
    op: str            # what is called
    what: str          # the bad input, in words
    code: str          # the statement that raises
    exc: type          # the exception type expected
    match: str         # a regular expression the message must contain (re.search)
    setup: str = ""    # statements run first; must not raise
    cleanup: str = ""  # statements run afterwards, whatever happened
    given: str = ""    # the setup in words, for the table (default: the setup code)

    @property
    def id(self):
        return f"{self.area}:{self.op}:{self.what}"


# -- helpers the cases use -----------------------------------------------------------------

class FakeArray(np.ndarray):
    """Arrays of the 'fake' device: ndarrays of another type, so mixing is detectable."""


class FakeDevice(tg.Device):
    """A second device that keeps its arrays in host memory (for mixed-device errors)."""

    def __init__(self):
        super().__init__("fake", FakeArray)

    def asarray(self, obj, dtype=None):
        return np.array(obj, dtype=dtype).view(FakeArray)

    def to_numpy(self, arr):
        return arr.view(np.ndarray)

    def copy(self, arr):
        return arr.copy()

    def zeros(self, shape, dtype):
        return np.zeros(shape, dtype).view(FakeArray)

    def ones(self, shape, dtype):
        return np.ones(shape, dtype).view(FakeArray)


class FakePlugin:
    @tg.hookimpl
    def tapegrad_register_devices(self, registry):
        registry.register_device(FakeDevice())


class DuplicateExp:
    """A plugin that defines 'exp', which tapegrad-elementwise already owns."""

    @tg.hookimpl
    def tapegrad_register_ops(self, registry):
        registry.register_op("exp", kernels={"cpu": np.exp}, vjp=lambda g, ans, x: (g * ans,))


class NotCallableKernel:
    @tg.hookimpl
    def tapegrad_register_ops(self, registry):
        registry.register_op("twice", kernels={"cpu": 2}, vjp=lambda g, ans, x: (2 * g,))


class ReturnsFloat(tg.Function):
    @staticmethod
    def forward(ctx, x):
        return 3.0

    @staticmethod
    def backward(ctx, g):
        return g


class WrongSquare(tg.Function):
    """x * x with a wrong gradient (g * x instead of 2 * g * x)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x


PICKLE_FILE = (
    "p = os.path.join(tmp, 'pickle.npz'); "
    "manifest = json.dumps({'format': 'tapegrad-npz', 'version': 1, 'root': {'t': 'array', 'a': 'a0'}}); "
    "np.savez(p, __tapegrad_manifest__=np.frombuffer(manifest.encode(), np.uint8), "
    "a0=np.array([{'x': 1}], dtype=object))")

CRAFTED_FILE = (
    "import io, zipfile; p = os.path.join(tmp, 'crafted.npz'); m = io.BytesIO(); "
    "np.lib.format.write_array(m, np.frombuffer(json.dumps({'format': 'tapegrad-npz', "
    "'version': 1, 'root': {'t': 'array', 'a': 'a0'}}).encode(), np.uint8)); h = io.BytesIO(); "
    "np.lib.format.write_array_header_1_0(h, {'descr': '<f8', 'fortran_order': False, "
    "'shape': (2 ** 40,)}); z = zipfile.ZipFile(p, 'w'); "
    "z.writestr('__tapegrad_manifest__.npy', m.getvalue()); "
    "z.writestr('a0.npy', h.getvalue() + bytes(64)); z.close()")


class PrivateApi:
    @tg.hookimpl
    def tapegrad_api(self):
        return {"__version__": "9.9"}


C = Case
CASES = [
    # -- core: tensors --------------------------------------------------------------------
    C("tapegrad", "tensor", "integer data with requires_grad",
      "tg.tensor([1, 2], requires_grad=True)", TypeError, r"floating-point.*int64"),
    C("tapegrad", "tensor", "bool data with requires_grad",
      "tg.tensor([True, False], requires_grad=True)", TypeError, r"floating-point.*bool"),
    C("tapegrad", "tensor", "strings",
      "tg.tensor(['a', 'b'])", TypeError, r"unsupported data of dtype <U1"),
    C("tapegrad", "tensor", "unknown device",
      "tg.tensor([1.0], device='tpu')", RuntimeError, r"unknown device 'tpu'; registered devices: .*cpu"),
    C("tapegrad", "device", "'cuda' on a machine without a GPU (or without tapegrad-cuda)",
      "tg.device('cuda')", RuntimeError, r"device 'cuda' is not available: .*(PyCUDA|tapegrad-cuda)"),
    C("tapegrad", "add", "shapes that do not broadcast",
      "tg.ones((2, 3)) + tg.ones((4,))", ValueError, r"^add: .*\(2, ?3\).*\(4,\)"),
    C("tapegrad", "add", "tensors on different devices",
      "tg.ones(2) + tg.ones(2, device='fake')", RuntimeError, r"add.*devices?.*(cpu.*fake|fake.*cpu)",
      setup="name = tg.register_plugin(FakePlugin(), name='fake-device')",
      cleanup="tg.unregister_plugin(name)",
      given="a plugin registers a second device, 'fake'"),
    C("tapegrad", "item", "a tensor with more than one element",
      "tg.ones(3).item()", ValueError, r"one element.*shape \(3,\)"),
    C("tapegrad", "bool", "a tensor with more than one element",
      "bool(tg.ones(3))", ValueError, r"ambiguous; use .any\(\) or .all\(\)"),
    C("tapegrad", "pickle.dumps", "a tensor",
      "import pickle; pickle.dumps(tg.ones(2))", TypeError, r"not pickled; use tg.save"),
    C("tapegrad", "numpy fallback", "a NumPy function with no tapegrad op on an input that requires grad",
      "np.linalg.norm(tg.ones(3, requires_grad=True))", TypeError, r"numpy.norm has no tapegrad op.*silently drop"),
    # -- core: autograd -------------------------------------------------------------------
    C("tapegrad", "backward", "a result that does not require grad",
      "tg.tensor([1.0, 2.0]).sum().backward()", RuntimeError, r"does not require grad and has no grad_fn"),
    C("tapegrad", "backward", "no gradient for a tensor with more than one element",
      "(x * 2).backward()", RuntimeError, r"implied only for a tensor with one element.*shape \(3,\)",
      setup="x = tg.ones(3, requires_grad=True)"),
    C("tapegrad", "backward", "a gradient of the wrong shape",
      "(x * 2).backward(tg.ones(2))", RuntimeError, r"gradient 0 has shape \(2,\) but the tensor has shape \(3,\)",
      setup="x = tg.ones(3, requires_grad=True)"),
    C("tapegrad", "backward", "a second backward through freed buffers",
      "y.backward()", RuntimeError, r"backward through the graph a second time.*retain_graph=True",
      setup="x = tg.ones(2, requires_grad=True); y = tg.exp(x).sum(); y.backward()"),
    C("tapegrad", "backward", "a saved value modified in place",
      "z.sum().backward()", RuntimeError, r"modified by an in-place operation.*'tanh'.*version 1.*version 0",
      setup="x = tg.ones(2, requires_grad=True); y = tg.tanh(x); z = tg.exp(y); y += 1"),
    C("tapegrad", "add_ (+=)", "in place on a leaf that requires grad",
      "x += 1", RuntimeError, r"leaf tensor that requires grad.*tg.no_grad",
      setup="x = tg.ones(2, requires_grad=True)"),
    C("tapegrad", "add_ (+=)", "in place on a view that takes part in a graph",
      "v += 1", RuntimeError, r"in-place modification of a view",
      setup="x = tg.ones(4, requires_grad=True); v = (x * 1).reshape(2, 2)"),
    C("tapegrad", "requires_grad", "set to False on a non-leaf",
      "y.requires_grad = False", RuntimeError, r"only be changed on leaf tensors",
      setup="x = tg.ones(2, requires_grad=True); y = x * 2"),
    C("tapegrad", "grad", "assigned a gradient of the wrong shape",
      "x.grad = tg.ones(3)", ValueError, r"assigned grad has shape \(3,\), but the tensor has shape \(2,\)",
      setup="x = tg.ones(2, requires_grad=True)"),
    C("tapegrad", "retain_grad", "a tensor that does not require grad",
      "tg.ones(2).retain_grad()", RuntimeError, r"does not require grad"),
    C("tapegrad", "register_hook", "a tensor that does not require grad",
      "tg.ones(2).register_hook(print)", RuntimeError, r"does not require grad"),
    C("tapegrad", "Function.apply", "forward returns a float",
      "ReturnsFloat.apply(tg.ones(2, requires_grad=True))", TypeError, r"forward must return Tensors"),
    C("tapegrad", "Function.apply", "a tensor that requires grad passed by keyword",
      "WrongSquare.apply(x=tg.ones(2, requires_grad=True))", TypeError,
      r"WrongSquare.apply: the tensor passed by keyword 'x' requires grad.*positionally"),
    C("tapegrad", "register_hook", "a hook that returns another dtype",
      "(x * 1.0).sum().backward()", TypeError, r"hook returned a gradient of dtype float64 for a gradient of dtype float32",
      setup="x = tg.ones(2, np.float32, requires_grad=True); x.register_hook(lambda g: tg.ones(2))"),
    C("tapegrad", "relu", "a complex input that requires grad, op without complex rules",
      "tg.relu(z)", TypeError,
      r"relu: the op has no complex gradient rule \(it is not registered with complex=True\)",
      setup="z = tg.tensor(np.array([1 + 2j, -1j]), requires_grad=True)"),
    C("tapegrad", "linear", "a complex result of a real input that requires grad",
      "tg.linear(tg.ones((1, 2), requires_grad=True), tg.tensor(np.array([[1j, 1.0]])))",
      TypeError, r"linear: the op has no complex gradient rule.*result complex128"),
    C("tapegrad", "backward", "a complex output without gradient=",
      "(z * 2.0).backward()", RuntimeError,
      r"grad can be implicitly created only for real scalar outputs; tensor 0 is complex128",
      setup="z = tg.tensor(np.array([1 + 2j]), requires_grad=True)"),
    C("tapegrad-elementwise", "complex", "real and imag of different dtypes",
      "tg.complex(tg.ones(2), tg.ones(2, np.float32))", TypeError,
      r"complex: expected real and imag to be both float32 or both float64 \(as torch.complex\), "
      r"got float64 and float32"),
    # -- core: plugins, saving, random, testing ------------------------------------------
    C("tapegrad", "tg.<name>", "an op no installed plugin provides",
      "tg.distributed", tg.OpNotAvailableError, r"provided by the plugin 'tapegrad-distributed'.*pip install tapegrad-distributed",
      # tapegrad-distributed exists now: hide what it published, as if it were not installed
      setup="_published = tg.distributed; del tg.distributed",
      cleanup="tg.distributed = _published"),
    C("tapegrad", "tg.<name>", "a name that is no op at all",
      "tg.not_an_op(tg.ones(2))", tg.OpNotAvailableError, r"no attribute or op 'not_an_op'"),
    C("tapegrad", "register_plugin", "an op another plugin already defines",
      "tg.register_plugin(DuplicateExp(), name='my-exp')", tg.PluginError,
      r"'exp' is defined by both 'tapegrad-elementwise' and 'my-exp'"),
    C("tapegrad", "register_plugin", "a kernel that is not callable",
      "tg.register_plugin(NotCallableKernel(), name='my-twice')", tg.PluginError,
      r"kernel for 'cpu' is not callable"),
    C("tapegrad", "register_plugin", "an api that exports a private or dunder name",
      "tg.register_plugin(PrivateApi(), name='my-version')", tg.PluginError,
      r"tapegrad_api of 'my-version' exports '__version__': private and dunder names"),
    C("tapegrad", "Tensor", "data passed to the class",
      "tg.Tensor([1.0, 2.0])", TypeError, r"does not build a tensor; use tg.tensor\(data\)"),
    C("tapegrad", "save", "an object that is not data",
      "tg.save({'f': print}, os.path.join(tmp, 'f.npz'))", TypeError, r"cannot save builtin_function_or_method"),
    C("tapegrad", "load", "a file that carries a pickle",
      "tg.load(p)", ValueError, r"pickled Python objects.*refused", setup=PICKLE_FILE,
      given="p: a tg.save-style .npz whose manifest points at an object array"),
    C("tapegrad", "load", "a truncated file",
      "tg.load(p)", ValueError, r"corrupt or truncated",
      setup="p = os.path.join(tmp, 'w.npz'); tg.save({'w': tg.ones(100)}, p); "
            "data = open(p, 'rb').read(); open(p, 'wb').write(data[:len(data) // 2])",
      given="p: a file written by tg.save, cut in half"),
    C("tapegrad", "load", "a file that is not a zip at all",
      "tg.load(p)", ValueError, r"not a tapegrad file \(or is corrupt",
      setup="p = os.path.join(tmp, 'notes.npz'); open(p, 'w').write('hello')"),
    C("tapegrad", "load", "an array header that declares more data than the file holds",
      "tg.load(p)", ValueError, r"declares shape \(1099511627776,\).*nothing was allocated",
      setup=CRAFTED_FILE, given="p: a tg.save-style file whose .npy header declares 8 TiB"),
    C("tapegrad", "load", "an .npz file not written by tg.save",
      "tg.load(p)", ValueError, r"not a file written by tg.save",
      setup="p = os.path.join(tmp, 'plain.npz'); np.savez(p, a=np.ones(2))"),
    C("tapegrad", "manual_seed", "a negative seed",
      "tg.manual_seed(-1)", ValueError, r"non-negative integer, got -1"),
    C("tapegrad", "random.rand", "an integer dtype",
      "tg.random.rand(2, dtype=tg.int64)", TypeError, r"floating-point type, got int64"),
    C("tapegrad", "gradcheck", "float32 inputs",
      "tg.gradcheck(lambda a: a * 2, tg.ones(2, dtype=tg.float32, requires_grad=True))",
      TypeError, r"float32; finite differences need float64"),
    C("tapegrad", "gradcheck", "a wrong gradient",
      "tg.gradcheck(WrongSquare.apply, tg.tensor([1.0, 2.0], requires_grad=True))",
      tg.testing.GradcheckError, r"input 0 at index \(1,\).*analytic 2 vs numeric 4"),
    # -- tapegrad-shape -------------------------------------------------------------------
    C("tapegrad-shape", "sum", "an axis out of range",
      "tg.ones((2, 3)).sum(axis=2)", np.exceptions.AxisError, r"^sum: axis 2 is out of bounds.*\(2, 3\)"),
    C("tapegrad-shape", "sum", "keepdims passed positionally",
      "tg.sum(tg.ones((2, 2)), 0, True)", TypeError, r"at most 1 \(axis\)"),
    C("tapegrad-shape", "reshape", "a shape of another size",
      "tg.ones((2, 3)).reshape(4, 2)", ValueError, r"^reshape: cannot reshape array of size 6"),
    C("tapegrad-shape", "transpose", "a repeated axis",
      "tg.ones((2, 3)).transpose((0, 0))", ValueError, r"^transpose: repeated axis"),
    C("tapegrad-elementwise", "clip", "a bound that requires grad",
      "tg.clip(tg.ones(2, requires_grad=True), a_min=tg.zeros(2, requires_grad=True))", TypeError,
      r"clip: keyword argument 'a_min' is a tensor that requires grad.*silently lost"),
    C("tapegrad-shape", "getitem", "an index out of range",
      "tg.ones(3)[5]", IndexError, r"^getitem: index 5 is out of bounds"),
    C("tapegrad-shape", "concatenate", "sizes that differ off the axis",
      "tg.concatenate([tg.ones((2, 3)), tg.ones((2, 4))])", ValueError,
      r"^concatenate: .*dimension 1.*size 3.*size 4"),
    C("tapegrad-shape", "stack", "shapes that differ",
      "tg.stack([tg.ones(2), tg.ones(3)])", ValueError, r"^stack: all input arrays must have the same shape"),
    C("tapegrad-shape", "split", "sections that do not divide the axis",
      "tg.split(tg.ones(5), 2)", ValueError, r"do not divide into 2 equal sections"),
    # -- tapegrad-linalg ------------------------------------------------------------------
    C("tapegrad-linalg", "matmul (@)", "inner dimensions that differ",
      "tg.ones((2, 3)) @ tg.ones((2, 3))", ValueError, r"^matmul: inner dimensions differ"),
    C("tapegrad-linalg", "matmul (@)", "a 0-d operand",
      "tg.tensor(2.0) @ tg.ones(3)", ValueError, r"0-d operands are not allowed"),
    C("tapegrad-linalg", "dot", "misaligned shapes",
      "tg.dot(tg.ones((2, 3)), tg.ones((2, 3)))", ValueError, r"^dot: shapes \(2, 3\) and \(2, 3\) are not aligned"),
    C("tapegrad-linalg", "einsum", "an output label no operand has",
      "tg.einsum('ij,jk->il', tg.ones((2, 3)), tg.ones((3, 4)))", ValueError,
      r"output label 'l' is in no operand"),
    C("tapegrad-linalg", "einsum", "ellipsis axes that do not broadcast",
      "tg.einsum('...ij,...jk->...ik', tg.ones((2, 2, 3)), tg.ones((3, 3, 4)))", ValueError,
      r"an axis under '...' has length 2 in operand 0 \(shape \(2, 2, 3\)\) and 3 in operand 1"),
    C("tapegrad-linalg", "einsum", "a label whose lengths differ between operands",
      "tg.einsum('ij,jk', tg.ones((2, 3)), tg.ones((4, 5)))", ValueError,
      r"^einsum: label 'j' has length 3 in operand 0 \(shape \(2, 3\)\) and 4 in operand 1"),
    # -- tapegrad-nn ----------------------------------------------------------------------
    C("tapegrad-nn", "cross_entropy", "a class label out of range",
      "tg.cross_entropy(tg.ones((2, 3)), [0, 3])", IndexError, r"class label 3 is out of range for 3 classes"),
    C("tapegrad-nn", "cross_entropy", "a negative class label",
      "tg.cross_entropy(tg.ones((2, 3)), [0, -1])", IndexError, r"class label -1 is out of range"),
    C("tapegrad-nn", "cross_entropy", "probabilities of the wrong shape",
      "tg.cross_entropy(tg.ones((2, 3)), tg.ones((2, 4)))", ValueError, r"must have the logits' shape \(2, 3\)"),
    C("tapegrad-nn", "cross_entropy", "an unknown reduction",
      "tg.cross_entropy(tg.ones((2, 3)), [0, 1], reduction='avg')", ValueError,
      r"reduction must be 'mean', 'sum' or 'none', got 'avg'"),
    C("tapegrad-nn", "cross_entropy", "a PyTorch keyword tapegrad does not support",
      "tg.cross_entropy(tg.ones((2, 3)), [0, 1], size_average=False)", TypeError,
      r"size_average"),
    C("tapegrad-nn", "cross_entropy", "a label out of range that is not ignore_index",
      "tg.cross_entropy(tg.ones((2, 3)), [0, -1])", IndexError,
      r"class label -1 is out of range for 3 classes"),
    C("tapegrad-nn", "gelu", "an unknown approximation",
      "tg.gelu(tg.ones(3), approximate='fast')", ValueError,
      r"approximate must be 'none' or 'tanh', got 'fast'"),
    C("tapegrad-nn", "glu", "an odd size along dim",
      "tg.glu(tg.ones((2, 3)))", ValueError, r"glu: the size of dim -1 must be even"),
    C("tapegrad-nn", "prelu", "a weight that is neither 1 nor C elements",
      "tg.prelu(tg.ones((2, 3)), tg.ones(2))", ValueError,
      r"prelu: weight of 2 elements does not fit input of shape \(2, 3\)"),
    C("tapegrad-nn", "nll_loss", "labels that do not fit the input",
      "tg.nll_loss(tg.zeros((4, 3)), np.array([0, 1]))", ValueError,
      r"nll_loss: labels must have the input's shape without the class axis"),
    C("tapegrad-nn", "nll_loss", "a class weight that requires grad",
      "tg.nll_loss(tg.zeros((2, 3)), np.array([0, 1]), tg.ones(3, requires_grad=True))",
      NotImplementedError,
      r"nll_loss: the derivative with respect to the class weight is not implemented"),
    C("tapegrad-nn", "binary_cross_entropy", "an input that is not a probability",
      "tg.binary_cross_entropy(tg.tensor([1.5]), tg.tensor([1.0]))", ValueError,
      r"every element of input must be a probability in \[0, 1\]"),
    C("tapegrad-nn", "mse_loss", "input and target of different shapes",
      "tg.mse_loss(tg.ones((4, 1)), tg.ones(4))", ValueError, r"must have the same shape"),
    C("tapegrad-nn", "Linear", "an input of the wrong width",
      "tg.nn.Linear(3, 2)(tg.ones((4, 5)))", ValueError, r"^linear: .*x \(4, 5\) and weight \(2, 3\)"),
    C("tapegrad-nn", "Module.__setattr__", "a plain tensor assigned to a parameter's name",
      "m.weight = tg.ones((2, 2))", TypeError, r"to 'weight' of Linear: it is a parameter",
      setup="m = tg.nn.Linear(2, 2)"),
    C("tapegrad-nn", "Dropout", "p outside [0, 1]",
      "tg.nn.Dropout(1.5)", ValueError, r"p must be a probability in \[0, 1\], got 1.5"),
    C("tapegrad-nn", "load_state_dict", "a missing key",
      "tg.nn.Linear(3, 2).load_state_dict({'weight': np.zeros((2, 3))})", RuntimeError,
      r"Missing key\(s\) in state_dict: 'bias'"),
    C("tapegrad-nn", "load_state_dict", "a mis-shaped value",
      "tg.nn.Linear(3, 2).load_state_dict({'weight': np.zeros((3, 2)), 'bias': np.zeros(2)})",
      RuntimeError, r"size mismatch for 'weight'.*\(3, 2\).*\(2, 3\)"),
    C("tapegrad-nn", "load_state_dict", "an unexpected key",
      "tg.nn.Linear(3, 2).load_state_dict({'weight': np.zeros((2, 3)), 'bias': np.zeros(2), 'scale': np.ones(1)})",
      RuntimeError, r"Unexpected key\(s\) in state_dict: 'scale'"),
    C("tapegrad-nn", "optim.SGD", "a negative learning rate",
      "tg.optim.SGD([w], lr=-0.1)", ValueError, r"SGD: invalid lr -0.1",
      setup="w = tg.ones(2, requires_grad=True)"),
    C("tapegrad-nn", "optim.SGD", "nesterov without momentum",
      "tg.optim.SGD([w], lr=0.1, nesterov=True)", ValueError, r"nesterov=True needs momentum > 0",
      setup="w = tg.ones(2, requires_grad=True)"),
    C("tapegrad-nn", "optim.Adam", "a beta outside [0, 1)",
      "tg.optim.Adam([w], betas=(0.9, 1.5))", ValueError, r"invalid beta2 1.5",
      setup="w = tg.ones(2, requires_grad=True)"),
    C("tapegrad-nn", "optim.SGD", "a parameter that is not a leaf",
      "tg.optim.SGD([w * 2], lr=0.1)", ValueError, r"is not a leaf tensor",
      setup="w = tg.ones(2, requires_grad=True)"),
    C("tapegrad-nn", "optim.Adam", "the same parameter twice",
      "tg.optim.Adam([w, w])", ValueError, r"appears more than once",
      setup="w = tg.ones(2, requires_grad=True)"),
    C("tapegrad-nn", "optim.SGD", "an empty parameter list",
      "tg.optim.SGD([], lr=0.1)", ValueError, r"empty parameter list"),
    C("tapegrad-nn", "optim.RMSprop", "alpha above 1",
      "tg.optim.RMSprop([w], alpha=1.5)", ValueError, r"RMSprop: invalid alpha 1.5",
      setup="w = tg.ones(2, requires_grad=True)"),
    C("tapegrad-nn", "optim.LBFGS", "step() without a closure",
      "tg.optim.LBFGS([w]).step()", TypeError, r"LBFGS.step needs a closure",
      setup="w = tg.ones(2, requires_grad=True)"),
    C("tapegrad-nn", "optim.LBFGS", "two parameter groups",
      "tg.optim.LBFGS([{'params': [w]}, {'params': [v]}])", ValueError,
      r"LBFGS doesn't support per-parameter options",
      setup="w = tg.ones(2, requires_grad=True); v = tg.ones(2, requires_grad=True)"),
    C("tapegrad-nn", "optim.lr_scheduler.OneCycleLR", "neither total_steps nor epochs",
      "tg.optim.lr_scheduler.OneCycleLR(tg.optim.SGD([w], lr=0.1), max_lr=1.0)", ValueError,
      r"OneCycleLR: give either total_steps", setup="w = tg.ones(2, requires_grad=True)"),
    C("tapegrad-nn", "optim.lr_scheduler.ReduceLROnPlateau", "factor 1 or more",
      "tg.optim.lr_scheduler.ReduceLROnPlateau(tg.optim.SGD([w], lr=0.1), factor=2.0)",
      ValueError, r"factor must be < 1.0", setup="w = tg.ones(2, requires_grad=True)"),
    C("tapegrad-nn", "data.DataLoader", "arrays of different lengths",
      "tg.data.DataLoader(np.ones((10, 2)), np.ones(9), batch_size=4)", ValueError,
      r"same length.*\[10, 9\]"),
    C("tapegrad-nn", "data.DataLoader", "batch_size 0",
      "tg.data.DataLoader(np.ones((10, 2)), batch_size=0)", ValueError, r"batch_size must be a positive int"),
    # -- tapegrad-checkpoint --------------------------------------------------------------
    C("tapegrad-checkpoint", "checkpoint", "something that is not callable",
      "tg.checkpoint(3, tg.ones(2))", TypeError, r"fn must be callable, got int"),
    C("tapegrad-checkpoint", "checkpoint_sequential", "a strategy class instead of an instance",
      "tg.checkpoint_sequential(tg.nn.Sequential(tg.nn.Tanh()), tg.ones(2), strategy=tg.checkpoint.SqrtN)",
      TypeError, r"a class: call it, e\.g\. SqrtN\(\)"),
    C("tapegrad-checkpoint", "checkpoint_sequential", "layers that are not a sequence",
      "tg.checkpoint_sequential(3, tg.ones(2))", TypeError, r"layers must be a tg.nn.Sequential"),
    C("tapegrad-checkpoint", "checkpoint.Every", "k = 0",
      "tg.checkpoint.Every(0)", ValueError, r"k must be a positive integer"),
    C("tapegrad-checkpoint", "checkpoint", "a parameter modified in place before backward",
      "y.sum().backward()", RuntimeError, r"modified by an in-place operation: parameter 0 of checkpoint",
      setup="w = tg.ones((2, 2), requires_grad=True); y = tg.checkpoint(lambda v: v @ w, tg.ones((1, 2))); "
            "w.detach().add_(1.0)"),
    # -- tapegrad-higher ------------------------------------------------------------------
    C("tapegrad-higher", "grad", "an input the outputs do not depend on",
      "tg.grad((x * 2).sum(), [x, y])", RuntimeError, r"input 1 .* was not used.*allow_unused=True",
      setup="x = tg.ones(2, requires_grad=True); y = tg.ones(2, requires_grad=True)"),
    C("tapegrad-higher", "hessian", "a function that does not return a scalar",
      "tg.hessian(lambda v: v * 2, tg.ones(2))", ValueError, r"must return a single tensor with one element"),
    C("tapegrad-higher", "jacobian", "an integer input",
      "tg.jacobian(lambda v: v * 2, tg.tensor([1, 2]))", TypeError, r"input 0 has dtype int64"),
    C("tapegrad-higher", "vmap", "mapped inputs of different sizes",
      "tg.vmap(lambda a, b: a + b)(tg.ones((3, 2)), tg.ones((4, 2)))", ValueError,
      r"vmap: the mapped axes have different sizes \(3 and 4\)"),
    C("tapegrad-higher", "vmap", "data-dependent Python control flow",
      "tg.vmap(lambda a: a if a.sum() > 0 else -a)(tg.ones((3, 2)))", RuntimeError,
      r"vmap: bool\(\) .* of a batched tensor .*tg.where"),
    C("tapegrad-higher", "vmap", "a random draw with the default randomness='error'",
      "tg.vmap(lambda a: a + tg.random.rand(2))(tg.ones((3, 2)))", RuntimeError,
      r"vmap: random.uniform draws random numbers inside tg.vmap.*randomness='different'"),
    C("tapegrad-higher", "vmap", "a batched tensor used inside an index",
      "tg.vmap(lambda a, i: a[i, None])(tg.ones((2, 3)), tg.tensor([0, 2]))", RuntimeError,
      r"vmap: a batched tensor used inside an index .*tg.take"),
    C("tapegrad-higher", "func.grad", "a function that does not return a scalar",
      "tg.func.grad(lambda a: a * 2.0)(tg.ones(2))", ValueError,
      r"grad: func must return a scalar tensor \(0-d\), got \(2,\)"),
    C("tapegrad-higher", "hvp", "a vector of the wrong shape",
      "tg.hvp(lambda v: (v ** 2).sum(), tg.ones(3), tg.ones(2))", ValueError,
      r"v\[0\] has shape \(2,\), but input 0 has shape \(3,\)"),
    # -- core: tg.compile -------------------------------------------------------------------
    C("tapegrad", "compile", "something that is not a function",
      "tg.compile(3)", TypeError, r"tg.compile: expected a function, got int"),
    C("tapegrad", "compile", "cache_size 0",
      "tg.compile(lambda x: x, cache_size=0)", ValueError, r"cache_size must be a positive int"),
    C("tapegrad", "compile", "an argument that cannot be a cache key",
      "tg.compile(lambda d: d)({'a': 1})", TypeError, r"cannot use an argument of type dict"),
    C("tapegrad", "compile", "a function returning a number",
      "tg.compile(lambda x: 3.0)(tg.ones(1))", TypeError, r"must return a Tensor.*returned float"),
    C("tapegrad", "compile", "create_graph=True through a compiled function",
      "tg.grad(f(x), x, create_graph=True)", RuntimeError,
      r"create_graph=True \(double backward\) through a tg.compile'd function is not supported",
      setup="f = tg.compile(lambda v: (v * v).sum()); x = tg.ones(2, requires_grad=True); f(x)"),
    C("tapegrad", "compile", "check=True, and a Python branch on a value",
      "f(-tg.ones(2))", RuntimeError, r"output 0 of .* differs between the compiled replay .* and eager",
      setup="f = tg.compile(lambda v: v * 2.0 if v.sum().item() > 0 else -v, check=True); "
            "f(tg.ones(2))"),
    # -- issue 14: the new elementwise functions -------------------------------------------
    C("tapegrad-elementwise", "round", "decimals that is not an int",
      "tg.round(tg.ones(3), decimals=1.5)", TypeError,
      r"^round: 'float' object cannot be interpreted as an integer \(input 0: shape \(3,\) float64"),
    C("tapegrad-elementwise", "nan_to_num", "copy=False (in place)",
      "tg.nan_to_num(tg.ones(3), copy=False)", ValueError,
      r"^nan_to_num: copy=False \(replacing the values in place\) is not supported; use x = "
      r"tg.nan_to_num\(x, ...\) \(input 0: shape \(3,\) float64"),
    C("tapegrad-elementwise", "power (**)", "an integer to a negative integer power",
      "tg.tensor([2, 3]) ** -1", ValueError,
      r"^power: Integers to negative integer powers are not allowed.*shape \(2,\) int64"),
    C("tapegrad-elementwise", "copysign", "shapes that do not broadcast",
      "tg.copysign(tg.ones(2), tg.ones(3))", ValueError,
      r"^copysign: operands could not be broadcast together with shapes \(2,\) \(3,\)"),
    C("tapegrad-elementwise", "i0", "a complex input",
      "tg.i0(tg.ones(2) + 1j)", TypeError, r"^i0: ufunc 'i0' not supported.*shape \(2,\) complex128"),
    C("tapegrad-elementwise", "exp", "a NumPy ufunc keyword (where=, out=, dtype=)",
      "tg.exp(tg.ones(2), where=[True, False])", TypeError,
      r"^exp\(\) got an unexpected keyword argument 'where': NumPy's ufunc keywords"),
    C("tapegrad-elementwise", "cross", "vectors of length 4",
      "tg.cross(tg.ones(2), tg.ones(4))", ValueError,
      r"^cross: incompatible dimensions for cross product.*b has shape \(4,\)"),
    C("tapegrad-elementwise", "cross", "an axis out of range",
      "tg.cross(tg.ones(3), tg.ones(3), axis=2)", np.exceptions.AxisError,
      r"^cross: axisa: axis 2 is out of bounds for array of dimension 1"),
    # -- issue 14: the new shape functions -------------------------------------------------
    C("tapegrad-shape", "cumsum", "an axis out of range",
      "tg.cumsum(tg.ones((2, 3)), axis=2)", np.exceptions.AxisError,
      r"^cumsum: axis 2 is out of bounds for array of dimension 2 \(input 0: shape \(2, 3\)"),
    C("tapegrad-shape", "sort", "order= (structured arrays)",
      "tg.sort(tg.ones(3), order='x')", ValueError,
      r"^sort: order= names fields of a structured array.*shape \(3,\) float64"),
    C("tapegrad-shape", "argsort", "an unknown kind",
      "tg.argsort(tg.ones(3), kind='bogus')", ValueError,
      r"^argsort: sort kind must be one of 'quick', 'heap', or 'stable' \(got 'bogus'\).*shape \(3,\)"),
    C("tapegrad-shape", "take", "an index out of range",
      "tg.take(tg.ones(3), [5])", IndexError,
      r"^take: index 5 is out of bounds for axis 0 with size 3 \(input 0: shape \(3,\) float64"),
    C("tapegrad-shape", "take_along_axis", "indices with fewer dimensions",
      "tg.take_along_axis(tg.ones((2, 3)), np.array([0, 1]), axis=1)", ValueError,
      r"^take_along_axis: `indices` and `arr` must have the same number of dimensions.*"
      r"shape \(2, 3\).*shape \(2,\) int64"),
    C("tapegrad-shape", "put_along_axis", "repeated indices and values that require grad",
      "tg.put_along_axis(tg.ones(3), np.array([1, 1]), tg.ones(2, requires_grad=True), None)",
      ValueError, r"^put_along_axis: indices write some position more than once, and values "
                  r"requires grad.*values.detach\(\)"),
    C("tapegrad-shape", "setitem", "an index that repeats an element, and a value that "
      "requires grad",
      "tg.setitem(tg.ones(3), tg.ones(2, requires_grad=True), index=np.array([1, 1]))"
      ".sum().backward()",
      ValueError, r"^setitem \(x\[index\] = value\): indices write some position more than "
                  r"once, and value requires grad.*value.detach\(\)"),
    C("tapegrad-shape", "pad", "pad_width for more axes than the tensor has",
      "tg.pad(tg.ones(3), ((1, 2), (3, 4)))", ValueError,
      r"^pad: pad_width of shape \(2, 2\) does not fit a tensor of 1 dimensions.*shape \(3,\)"),
    C("tapegrad-shape", "pad", "a negative pad_width",
      "tg.pad(tg.ones(3), -1)", ValueError, r"^pad: pad_width must not be negative, got -1"),
    C("tapegrad-shape", "pad", "a mode tapegrad does not provide",
      "tg.pad(tg.ones(3), 1, mode='median')", ValueError,
      r"^pad: mode 'median' is not supported \(tapegrad pads with constant, edge, reflect"),
    C("tapegrad-shape", "quantile", "q outside [0, 1]",
      "tg.quantile(tg.ones(3), 1.5)", ValueError,
      r"^quantile: Quantiles must be in the range \[0, 1\], got 1.5"),
    C("tapegrad-shape", "percentile", "q outside [0, 100]",
      "tg.percentile(tg.ones(3), 150)", ValueError,
      r"^percentile: Percentiles must be in the range \[0, 100\], got 150$"),
    C("tapegrad-shape", "quantile", "an unknown method",
      "tg.quantile(tg.ones(3), 0.5, method='bogus')", ValueError,
      r"^quantile: 'bogus' is not a valid method; use one of inverted_cdf"),
    C("tapegrad-shape", "quantile", "q that requires grad",
      "tg.quantile(tg.ones(3), tg.tensor(0.5, requires_grad=True))", TypeError,
      r"^quantile: q is not differentiable here"),
    C("tapegrad-shape", "quantile", "an empty tensor",
      "tg.quantile(tg.ones(0), 0.5)", IndexError,
      r"^quantile: cannot take a quantile of an empty slice.*shape \(0,\)"),
    C("tapegrad-shape", "median", "an axis out of range",
      "tg.median(tg.ones((2, 3)), axis=2)", np.exceptions.AxisError,
      r"^median: axis 2 is out of bounds for a tensor of dimension 2"),
    C("tapegrad-shape", "average", "weights of another shape and no axis",
      "tg.average(tg.ones((2, 3)), weights=tg.ones(2))", TypeError,
      r"^average: axis must be specified when the shapes of a \(2, 3\) and weights \(2,\) differ"),
    C("tapegrad-shape", "average", "weights that sum to zero",
      "tg.average(tg.ones(3), weights=tg.zeros(3))", ZeroDivisionError,
      r"^average: the weights sum to zero"),
    C("tapegrad-shape", "diff", "a negative order n",
      "tg.diff(tg.ones(3), n=-1)", ValueError, r"^diff: the order n must be non-negative, got -1"),
    C("tapegrad-shape", "gradient", "an axis too short for edge_order",
      "tg.gradient(tg.ones(1))", ValueError,
      r"^gradient: axis 0 of a tensor of shape \(1,\) is too small"),
    C("tapegrad-shape", "r_", "an unknown directive",
      "tg.r_['bogus', tg.ones(2), tg.ones(2)]", ValueError,
      r"^r_: unknown special directive 'bogus'"),
    C("tapegrad-shape", "r_", "trans1d out of range",
      "tg.r_['0,2,5', tg.ones(2)]", ValueError,
      r"^r_: trans1d 5 is out of range for an item of 1 dimension\(s\) \(shape \(2,\) made 2-d\)"),
    C("tapegrad-shape", "r_", "items whose dimensions differ",
      "tg.r_[tg.ones(2), tg.ones((2, 2))]", ValueError,
      r"^r_: concatenate: all the input arrays must have same number of dimensions.*shape \(2, 2\)"),
    C("tapegrad-shape", "repeat", "repeats of the wrong length",
      "tg.repeat(tg.ones(3), [1, 2])", ValueError,
      r"^repeat: operands could not be broadcast together with shape \(3,\) \(2,\)"),
    C("tapegrad-shape", "array_split", "zero sections",
      "tg.array_split(tg.ones(3), 0)", ValueError,
      r"^array_split: the number of sections must be larger than 0"),
    C("tapegrad-shape", "vsplit", "a 1-d tensor",
      "tg.vsplit(tg.ones(5), 5)", ValueError,
      r"^vsplit only works on tensors of 2 or more dimensions, got shape \(5,\)"),
    C("tapegrad-shape", "hstack", "sizes that differ off the axis",
      "tg.hstack([tg.ones((2, 3)), tg.ones((3, 3))])", ValueError,
      r"^concatenate: .*along dimension 0.*size 2.*size 3.*shape \(2, 3\).*shape \(3, 3\)"),
    C("tapegrad-shape", "trace", "a 1-d tensor",
      "tg.trace(tg.ones(3))", ValueError,
      r"^trace: needs a tensor of at least 2 dimensions, got shape \(3,\)"),
    C("tapegrad-shape", "ptp", "an axis out of range",
      "tg.ptp(tg.ones((2, 3)), axis=3)", np.exceptions.AxisError,
      r"^ptp: axis 3 is out of bounds for a tensor of dimension 2"),
    C("tapegrad-shape", "tril", "k that is not an int",
      "tg.tril(tg.ones((3, 3)), k=1.5)", TypeError, r"^tril: k must be an int, got 1.5"),
    C("tapegrad-shape", "tensordot", "summed axes of different lengths",
      "tg.tensordot(tg.ones((2, 3)), tg.ones((4, 5)))", ValueError,
      r"^tensordot: shape-mismatch for sum \(input 0: shape \(2, 3\).*shape \(4, 5\)"),
    C("tapegrad-shape", "inner", "last axes of different lengths",
      "tg.inner(tg.ones(3), tg.ones(4))", ValueError,
      r"^inner: the last axes of a \(shape \(3,\)\) and b \(shape \(4,\)\) must have the same length"),
    # -- issue 14: tg.linalg -----------------------------------------------------------------
    C("tapegrad-linalg", "linalg.inv", "a matrix that is not square",
      "tg.linalg.inv(tg.ones((2, 3)))", np.linalg.LinAlgError,
      r"^linalg_inv: last 2 dimensions of the array must be square, got shape \(2, 3\)"),
    C("tapegrad-linalg", "linalg.inv", "a singular matrix",
      "tg.linalg.inv(tg.zeros((2, 2)))", np.linalg.LinAlgError,
      r"^linalg_inv: Singular matrix \(input 0: shape \(2, 2\) float64"),
    C("tapegrad-linalg", "linalg.solve", "a singular matrix",
      "tg.linalg.solve(tg.zeros((2, 2)), tg.ones(2))", np.linalg.LinAlgError,
      r"^linalg_solve: Singular matrix \(input 0: shape \(2, 2\) float64.*shape \(2,\)"),
    C("tapegrad-linalg", "linalg.solve", "batch dimensions that do not broadcast",
      "tg.linalg.solve(tg.ones((3, 2, 2)) + tg.eye(2), tg.ones((4, 2, 1)))", ValueError,
      r"^linalg_solve: batch dimensions \(3,\) of a \(shape \(3, 2, 2\)\) and \(4,\) of b "
      r"\(shape \(4, 2, 1\)\) do not broadcast"),
    C("tapegrad-linalg", "linalg.solve", "b of the wrong length",
      "tg.linalg.solve(tg.eye(2), tg.ones(3))", ValueError,
      r"^linalg_solve: a has shape \(2, 2\) but the vector b has length 3, not 2"),
    C("tapegrad-linalg", "linalg.cholesky", "a matrix that is not positive definite",
      "tg.linalg.cholesky(tg.tensor([[1.0, 2.0], [2.0, 1.0]]))", np.linalg.LinAlgError,
      r"^linalg_cholesky: Matrix is not positive definite \(input 0: shape \(2, 2\) float64"),
    C("tapegrad-linalg", "linalg.det", "a 1-d tensor",
      "tg.linalg.det(tg.ones(3))", np.linalg.LinAlgError,
      r"^linalg_det: 1-dimensional array given \(shape \(3,\)\); the array must be at least "
      r"two-dimensional"),
    C("tapegrad-linalg", "linalg.eigh", "a bad UPLO",
      "tg.linalg.eigh(tg.eye(2), UPLO='X')", ValueError,
      r"^linalg.eigh: UPLO argument must be 'L' or 'U', got 'X'"),
    C("tapegrad-linalg", "polyfit", "complex weights of real data (NumPy refuses them too)",
      "tg.polyfit(tg.tensor([0.0, 1.0, 2.0]), tg.tensor([1.0, 2.0, 3.0]), 1, "
      "w=tg.tensor([1j, 1.0, 1.0]))", TypeError,
      r"^polyfit: complex weights \(complex128\) need complex x and y"),
    C("tapegrad-linalg", "roots", "an exactly repeated root, differentiated",
      "tg.roots(p).sum().backward()", np.linalg.LinAlgError,
      r"roots: the polynomial has a repeated root",
      setup="p = tg.tensor([1.0, -2.0, 1.0], requires_grad=True)"),
    C("tapegrad-shape", "quantile", "complex data (NumPy refuses it too)",
      "tg.quantile(tg.tensor([1 + 1j, 2 - 1j]), 0.5)", TypeError,
      r"^quantile: a must be an array of real numbers, got a complex128 tensor"),
    C("tapegrad-linalg", "linalg.norm", "an unknown ord",
      "tg.linalg.norm(tg.ones((2, 2)), ord=3)", ValueError,
      r"^linalg.norm: invalid norm order 3 for matrices"),
    C("tapegrad-linalg", "linalg.norm", "a matrix ord for a vector",
      "tg.linalg.norm(tg.ones(3), ord='fro')", ValueError,
      r"^linalg.norm: invalid norm order 'fro' for vectors"),
    C("tapegrad-linalg", "linalg.norm", "three axes",
      "tg.linalg.norm(tg.ones((2, 2, 2)), axis=(0, 1, 2))", ValueError,
      r"^linalg.norm: improper number of dimensions to norm \(axis \(0, 1, 2\)\)"),
    C("tapegrad-linalg", "linalg.matrix_power", "an exponent that is not an int",
      "tg.linalg.matrix_power(tg.eye(2), 1.5)", TypeError,
      r"^linalg.matrix_power: exponent must be an integer, got float 1.5"),
    C("tapegrad-linalg", "linalg.lstsq", "b of the wrong length",
      "tg.linalg.lstsq(tg.ones((3, 2)), tg.ones(4))", np.linalg.LinAlgError,
      r"^linalg.lstsq: incompatible dimensions: a has shape \(3, 2\), b has shape \(4,\)"),
    C("tapegrad-linalg", "linalg.qr", "an unknown mode",
      "tg.linalg.qr(tg.ones((2, 2)), mode='bogus')", ValueError,
      r"^linalg.qr: mode 'bogus' is not supported"),
    C("tapegrad-linalg", "linalg.svd", "hermitian=True",
      "tg.linalg.svd(tg.eye(2), hermitian=True)", ValueError,
      r"^linalg.svd: hermitian=True is not supported \(use tg.linalg.eigh"),
    C("tapegrad-linalg", "linalg.eigh (backward)", "repeated eigenvalues, gradient through the eigenvectors",
      "tg.linalg.eigh(a).eigenvectors[:, 0].sum().backward()", np.linalg.LinAlgError,
      r"^linalg_eigh: the gradient through the eigenvectors is not defined for repeated "
      r"eigenvalues", setup="a = tg.eye(2, requires_grad=True)"),
    # -- issue 14: tapegrad-nn's logsumexp(b=) ----------------------------------------------
    C("tapegrad-nn", "logsumexp", "b of a shape that does not broadcast",
      "tg.logsumexp(tg.ones((2, 3)), b=tg.ones(4))", ValueError,
      r"^logsumexp: b of shape \(4,\) does not broadcast with a of shape \(2, 3\)"),
    C("tapegrad-nn", "logsumexp", "return_sign=True",
      "tg.logsumexp(tg.ones((2, 3)), return_sign=True)", ValueError,
      r"^logsumexp: return_sign=True is not supported"),
    # -- issue 15: convolutions (tapegrad-nn) ----------------------------------------------
    C("tapegrad-nn", "conv2d", "input channels that do not match the weight",
      "tg.conv2d(tg.ones((2, 3, 8, 8)), tg.ones((16, 4, 3, 3)))", ValueError,
      r"^conv2d: expected input with 4 channels \(weight \(16, 4/groups=1, 3, 3\)\) but got input of shape \(2, 3, 8, 8\)"),
    C("tapegrad-nn", "conv2d", "a kernel larger than the padded input",
      "tg.conv2d(tg.ones((1, 2, 4, 4)), tg.ones((3, 2, 5, 5)))", ValueError,
      r"^conv2d: the kernel \(5, 5\) with dilation \(1, 1\) does not fit"),
    C("tapegrad-nn", "conv1d", "a float32 input with a float64 weight",
      "tg.conv1d(tg.ones((1, 2, 8), dtype=tg.float32), tg.ones((3, 2, 3)))", TypeError,
      r"^conv1d: input, weight and bias must have the same dtype"),
    C("tapegrad-nn", "nn.Conv2d", "an input with the wrong number of channels",
      "tg.nn.Conv2d(3, 16, 3)(tg.ones((2, 4, 8, 8)))", ValueError,
      r"^Conv2d\(3, 16, kernel_size=\(3, 3\)\): expected input with in_channels=3 but got input of shape \(2, 4, 8, 8\)"),
    C("tapegrad-nn", "nn.Conv2d", "padding_mode='reflect'",
      "tg.nn.Conv2d(3, 16, 3, padding_mode='reflect')", ValueError,
      r"^Conv2d: padding_mode='reflect' is not supported"),
    C("tapegrad-nn", "nn.LSTM", "an input whose feature size is not input_size",
      "tg.nn.LSTM(3, 4)(tg.ones((5, 2, 7)))", ValueError,
      r"^LSTM\(3, 4\): expected input with input_size=3 but got input of shape \(5, 2, 7\)"),
    C("tapegrad-nn", "nn.GRU", "an initial state of the wrong shape",
      "tg.nn.GRU(3, 4, num_layers=2)(tg.ones((5, 2, 3)), tg.zeros((1, 2, 4)))", ValueError,
      r"^GRU\(3, 4, num_layers=2\): expected hidden state of shape \(2, 2, 4\)"),
    C("tapegrad-nn", "nn.LSTM", "proj_size > 0",
      "tg.nn.LSTM(3, 4, proj_size=2)", ValueError,
      r"^LSTM: proj_size=2 is not supported"),
    C("tapegrad-nn", "embedding", "an index out of range",
      "tg.embedding(tg.tensor([0, 5]), tg.zeros((3, 2)))", IndexError,
      r"^embedding: index 5 is out of range for weight of shape \(3, 2\)"),
    C("tapegrad-nn", "embedding", "float indices",
      "tg.embedding(tg.tensor([0.0]), tg.zeros((3, 2)))", TypeError,
      r"^embedding: indices must be an integer tensor"),
    C("tapegrad-nn", "masked_fill", "a mask that does not broadcast",
      "tg.ones((3, 4)).masked_fill(tg.tensor([True, False]), 0.0)", ValueError,
      r"^masked_fill: mask of shape \(2,\) does not broadcast to the input's shape \(3, 4\)"),
    C("tapegrad-nn", "scaled_dot_product_attention", "attn_mask together with is_causal",
      "tg.scaled_dot_product_attention(tg.ones((3, 4)), tg.ones((3, 4)), tg.ones((3, 4)), "
      "attn_mask=tg.ones((3, 3)), is_causal=True)", ValueError,
      r"^scaled_dot_product_attention: pass either attn_mask or is_causal"),
    C("tapegrad-nn", "nn.MultiheadAttention", "a query of the wrong embedding size",
      "tg.nn.MultiheadAttention(4, 2)(tg.ones((3, 2, 5)), tg.ones((3, 2, 4)), tg.ones((3, 2, 4)))",
      ValueError, r"^MultiheadAttention\(embed_dim=4\): query must be .*got shape \(3, 2, 5\)"),
    C("tapegrad-nn", "max_pool2d", "padding larger than half the kernel",
      "tg.max_pool2d(tg.ones((1, 1, 4, 4)), 2, padding=2)", ValueError,
      r"^max_pool2d: padding \(2, 2\) must be at most half of kernel_size \(2, 2\)"),
    C("tapegrad-nn", "nn.MaxPool2d", "a 2-d input",
      "tg.nn.MaxPool2d(2)(tg.ones((2, 3)))", ValueError,
      r"^MaxPool2d\(kernel_size=2, .*\): max_pool2d: expected a 4-d \(batched\) or 3-d "
      r"\(unbatched\) input, got input of shape \(2, 3\)"),
    C("tapegrad-nn", "fold", "a block count that does not match output_size",
      "tg.fold(tg.ones((1, 4, 8)), (4, 4), 2)", ValueError,
      r"^fold: output_size \(4, 4\) with kernel_size \(2, 2\).* gives 9 blocks, but the input "
      r"of shape \(1, 4, 8\) has 8"),
    C("tapegrad-nn", "interpolate", "mode='bicubic'",
      "tg.interpolate(tg.ones((1, 1, 2, 2)), size=4, mode='bicubic')", ValueError,
      r"^interpolate: mode 'bicubic' is not supported"),
    # -- issue 14: tapegrad-scipy ----------------------------------------------------------
    C("tapegrad-scipy", "scipy.special.logsumexp", "return_sign=True",
      "tg.scipy.special.logsumexp(tg.ones(3), return_sign=True)", ValueError,
      r"^tg.scipy.special.logsumexp: return_sign=True is not supported"),
    C("tapegrad-scipy", "scipy.special.softmax", "an axis out of range",
      "tg.scipy.special.softmax(tg.ones(3), axis=2)", np.exceptions.AxisError,
      r"^scipy_special_softmax: axis 2 is out of bounds for array of dimension 1 \(input 0: "
      r"shape \(3,\)"),
    C("tapegrad-scipy", "scipy.special.xlogy", "shapes that do not broadcast",
      "tg.scipy.special.xlogy(tg.ones(2), tg.ones(3))", ValueError,
      r"^xlogy: operands could not be broadcast together with shapes \(2,\) \(3,\)"),
    C("tapegrad-scipy", "scipy.linalg.sqrtm", "a matrix that is not symmetric",
      "tg.scipy.linalg.sqrtm(tg.tensor([[1.0, 2.0], [0.0, 1.0]]))", ValueError,
      r"^scipy_linalg_sqrtm: sqrtm: only symmetric matrices are supported.*shape \(2, 2\)"),
    C("tapegrad-scipy", "scipy.linalg.sqrtm", "a negative eigenvalue",
      "tg.scipy.linalg.sqrtm(tg.tensor([[1.0, 2.0], [2.0, 1.0]]))", ValueError,
      r"^scipy_linalg_sqrtm: sqrtm: the matrix has a negative eigenvalue \(-1\)"),
    C("tapegrad-scipy", "scipy.linalg.solve_triangular", "a singular matrix",
      "tg.scipy.linalg.solve_triangular(tg.zeros((2, 2)), tg.ones(2))", np.linalg.LinAlgError,
      r"^scipy_linalg_solve_triangular: singular matrix.*shape \(2, 2\)"),
    C("tapegrad-scipy", "scipy.linalg.cho_solve", "a bare matrix instead of (c, lower)",
      "tg.scipy.linalg.cho_solve(tg.ones((2, 2)), tg.ones(2))", TypeError,
      r"^cho_solve: the first argument must be the pair \(c, lower\).*got a tensor of shape \(2, 2\)"),
    C("tapegrad-scipy", "scipy.signal.convolve", "inputs of different dimensions",
      "tg.scipy.signal.convolve(tg.ones(3), tg.ones((2, 2)))", ValueError,
      r"^scipy_signal_convolve: convolve: in1 and in2 must have the same number of dimensions, "
      r"got shapes \(3,\) and \(2, 2\)"),
    C("tapegrad-scipy", "scipy.stats.dirichlet.logpdf", "x off the simplex",
      "tg.scipy.stats.dirichlet.logpdf(tg.tensor([0.2, 0.3]), tg.ones(2))", ValueError,
      r"^dirichlet: each x must lie within the simplex"),
    C("tapegrad-scipy", "scipy.stats.dirichlet.logpdf", "alpha not positive",
      "tg.scipy.stats.dirichlet.logpdf(tg.tensor([0.5, 0.5]), -tg.ones(2))", ValueError,
      r"^dirichlet: all parameters alpha must be greater than 0, got \[-1.0, -1.0\]"),
    C("tapegrad-scipy", "scipy.stats.multivariate_normal.logpdf", "x of the wrong length",
      "tg.scipy.stats.multivariate_normal.logpdf(tg.ones(2), tg.ones(3))", ValueError,
      r"^multivariate_normal: x's last axis must have length 3 to match cov \(3, 3\), got shape \(2,\)"),
    C("tapegrad-scipy", "scipy.stats.multivariate_normal.logpdf", "a covariance that is not positive definite",
      "tg.scipy.stats.multivariate_normal.logpdf(tg.ones(2), cov=np.array([[1.0, 2.0], [2.0, 1.0]]))",
      np.linalg.LinAlgError, r"^linalg_cholesky: Matrix is not positive definite.*shape \(2, 2\)"),
    # -- issue 18: tapegrad-fft -------------------------------------------------------------
    C("tapegrad-fft", "fft.rfft", "a complex input (NumPy refuses it too)",
      "tg.fft.rfft(tg.tensor(np.array([1.0, 2j, 0.5])))", TypeError,
      r"^fft_rfft: fft.rfft: the input must be real, got complex128 \(shape \(3,\)\)"),
    C("tapegrad-fft", "fft.fft", "n < 1", "tg.fft.fft(tg.ones(4), n=0)", ValueError,
      r"^fft_fft: Invalid number of FFT data points \(0\) specified.*shape \(4,\) float64"),
    C("tapegrad-fft", "fft.ifft", "an unknown norm", "tg.fft.ifft(tg.ones(4), norm='unit')",
      ValueError, r"^fft_ifft: Invalid norm value unit; should be \"backward\", \"ortho\" or"),
    C("tapegrad-fft", "fft.fftn", "out=", "tg.fft.fftn(tg.ones(4), out=np.empty(4, complex))",
      TypeError, r"^fft.fftn: out= is not supported \(tensors are not written into"),
    C("tapegrad-fft", "fft.fft2", "a 1-d input (axes (-2, -1))", "tg.fft.fft2(tg.ones(4))",
      IndexError, r"^fft.fft2: axis -2 is out of bounds for an input of shape \(4,\)"),
    C("tapegrad-fft", "fft.irfftn", "s and axes of different lengths",
      "tg.fft.irfftn(tg.ones((2, 3)), s=(2, 3), axes=(0,))", ValueError,
      r"^fft.irfftn: shape and axes have different lengths \(s=\(2, 3\), axes=\(0,\)\)"),
    C("tapegrad-fft", "fft.fftfreq", "a spacing d that requires grad",
      "tg.fft.fftfreq(4, tg.tensor(0.5, requires_grad=True))", TypeError,
      r"^fft.fftfreq: the sample spacing d must be a number"),
]


def namespace(tmp):
    return {"tg": tg, "np": np, "os": os, "json": json, "tmp": str(tmp), **{
        name: value for name, value in globals().items()
        if isinstance(value, type) and value.__module__ == __name__}}


def run(case, tmp):
    """Run `case` in a fresh namespace; return the exception its code raised (or None)."""
    ns = namespace(tmp)
    exec(compile(case.setup, f"<setup of {case.id}>", "exec"), ns)
    try:
        exec(compile(case.code, f"<{case.id}>", "exec"), ns)
    except Exception as exc:  # noqa: BLE001 (what is raised is the point)
        return exc
    finally:
        if case.cleanup:
            exec(compile(case.cleanup, f"<cleanup of {case.id}>", "exec"), ns)
    return None


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_raises_a_clear_error(case, tmp_path):
    plugins_before = tg.registry().plugins
    exc = run(case, tmp_path)
    assert exc is not None, f"{case.code!r} raised nothing"
    assert type(exc) is case.exc, f"{case.code!r} raised {type(exc).__name__}: {exc}"
    assert re.search(case.match, str(exc), flags=re.S), f"message does not match {case.match!r}: {exc}"
    assert tg.registry().plugins == plugins_before, "the case left a plugin registered"


def test_cases_are_many_and_unique():
    assert len(CASES) >= 30
    assert len({c.id for c in CASES}) == len(CASES)


def test_bad_inputs_table_is_current():
    """docs/bad-inputs.md is what docs/gen_bad_inputs.py generates from CASES now."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("gen_bad_inputs", ROOT / "docs" / "gen_bad_inputs.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    with tempfile.TemporaryDirectory() as tmp:
        expected = gen.render(CASES, run, tmp)
    committed = (ROOT / "docs" / "bad-inputs.md").read_text()
    assert committed == expected, (
        "docs/bad-inputs.md is stale: run `python docs/gen_bad_inputs.py` and commit the result")
