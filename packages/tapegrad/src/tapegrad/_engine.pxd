# The tape, as a data structure.  Read this file as the specification of the engine;
# `_engine.pyx` is its implementation.
#
# Invariants
# ----------
# * A Tensor with `_node is None` is a leaf.  Only leaves (and non-leaves that called
#   `retain_grad()`) ever hold `.grad`.
# * A non-leaf Tensor always has `_requires_grad == True` and `_node` set: the Node that
#   produced it, `_output_nr` saying which of that node's outputs it is.
# * A Node holds strong references to what produced its inputs (`edges`: Nodes, or leaf
#   Tensors that accumulate gradient) and to the inputs it saved for its VJP, but never to
#   its own outputs (it keeps only the output's array and version counter).  So the graph is
#   a DAG owned by its outputs: dropping the last output frees it by reference counting
#   alone, with no cycle for the garbage collector to find.
# * Versions: every in-place write to a tensor's storage bumps its VersionCounter, which is
#   shared by every Tensor that aliases that storage (detach(), views).  A Node records the
#   versions of what it saved; a VJP that would read a value written since raises.
# * The traversal (`run_backward`) is iterative (Kahn's algorithm with dependency counts
#   kept in dicts local to one call), so deep graphs cost linear time and no C or Python
#   recursion, and two threads may run backward at the same time on independent graphs.


cdef class VersionCounter:
    cdef public long long value       # number of in-place writes to the guarded storage


cdef class Device:
    cdef readonly str name            # "cpu", "cuda", ...: the key kernels are registered under
    cdef readonly object array_type   # the array class this device's kernels return


cdef class Op:
    cdef readonly str name            # public name, e.g. "exp"; also the kernel table key
    cdef readonly str plugin          # distribution/plugin that registered it
    cdef readonly dict kernels        # device name -> kernel(*arrays, **params) -> array
    cdef readonly object vjp          # vjp(g, ans, *inputs, **params) -> tuple, one per input
    cdef readonly object jvp          # optional forward-mode rule (unused by the engine)
    cdef readonly int nin             # leading positional tensor inputs; -1: all positionals
    cdef readonly bint seq_input      # inputs arrive as one sequence (concatenate, stack)
    cdef readonly tuple params        # names that extra positional arguments bind to
    cdef readonly tuple differentiable  # input indexes that get gradients; () = none
    cdef readonly bint view           # output may alias input 0's storage (shares its version)
    cdef readonly bint twice_differentiable  # False: VJP is not itself differentiable
    cdef readonly list samples        # sample inputs for the contract kit
    cdef readonly str doc
    cdef readonly tuple save_inputs   # per input: does the VJP read it? None = all are read
    cdef readonly bint save_ans       # does the VJP read `ans`?
    cdef bint _save_no_inputs         # save_inputs=False: the VJP reads no input
    cdef bint _all_diff               # differentiable covers every input (fast path)
    cdef bint saves_input(self, Py_ssize_t i)


cdef class Node:
    cdef readonly str name            # op (or Function class) name, for errors and repr
    cdef tuple edges                  # per input: Node, leaf Tensor or None (no gradient)
    cdef tuple edge_nrs               # per input: which output of the edge Node it was
    cdef tuple inputs                 # inputs as passed (Tensors and plain values); None once freed
    cdef tuple versions               # per input: version when saved (-1 for non-tensors)
    cdef readonly int n_outputs
    cdef bint released                # saved values were freed by a backward without retain_graph
    cdef dict hooks                   # output_nr -> [hook]: tensor hooks on non-leaf outputs
    cdef dict retained                # output_nr -> weakref of a non-leaf that called retain_grad()
    cdef public object trace          # forward stack recorded in anomaly mode, else None
    cdef list _run_vjp(self, list grads)   # gradients per input, shaped like the inputs
    cdef void release(self)
    cdef void _check_saved(self) except *


cdef class OpNode(Node):
    cdef readonly Op op
    cdef dict params                  # the op's keyword parameters
    cdef object ans_data              # output array (saved by reference, not as a Tensor: no cycle)
    cdef VersionCounter ans_vc        # the output's version counter
    cdef long long ans_version        # its value when saved
    cdef Device device                # device of the output


cdef class FunctionNode(Node):
    cdef object ctx                   # the tg.Function context (saved tensors, user attributes)
    cdef object backward_fn           # Function.backward
    cdef tuple out_meta               # per output: (shape, dtype, device) to zero-fill missing grads


cdef class TensorBase:
    cdef readonly object _data        # the device array
    cdef readonly Device _device
    cdef bint _requires_grad
    cdef object _grad                 # Tensor or None
    cdef Node _node                   # the op that produced this tensor; None for leaves
    cdef int _output_nr               # which output of _node this is
    cdef VersionCounter _vc           # created on first need (alias, in-place, or saving)
    cdef bint _retains_grad
    cdef bint _is_view                # storage may be shared with another tensor's (a view)
    cdef list _hooks                  # hooks of a leaf (non-leaf hooks live on the Node)
    cdef object __weakref__
