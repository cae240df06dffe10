# The tape, as a data structure.  Read this file as the specification of the engine;
# `_engine.pyx` is its implementation.
#
# Invariants
# ----------
# * A Tensor with `_node is None` is a leaf.  Only leaves (and non-leaves that called
#   `retain_grad()`) ever hold `.grad`.
# * A non-leaf Tensor always has `_requires_grad == True` and `_node` set: the Node that
#   produced it, `_output_nr` saying which of that node's outputs it is.
# * A Node holds strong references to what produced its inputs (`edges`: Nodes, or the
#   LeafRef of a leaf, which reaches the leaf weakly) and to SavedTensor records of the
#   values its rule reads (array, version counter, producer), but never to a Tensor object
#   and never to its own outputs (it keeps only the output's array and version counter).
#   So the graph is a DAG owned by its outputs that no user object is part of: dropping
#   the last output frees it by reference counting alone, with no cycle for the garbage
#   collector to find -- which is why nodes and their tuples are not GC-tracked (see
#   Note: [the graph holds no user-visible tensors] in _engine.pyx).
# * Versions: every in-place write to a tensor's storage bumps its VersionCounter, which is
#   shared by every Tensor that aliases that storage (detach(), views).  A SavedTensor
#   records the version it saw; a rule that would read a value written since raises.
# * The traversal (`run_backward`) is iterative (Kahn's algorithm with dependency counts),
#   so deep graphs cost linear time and no C or Python recursion.  Per-node traversal
#   state lives on the Node, owned by one running backward at a time (`_walk`); per-leaf
#   state lives in a dict of the call, so threads may backpropagate independent graphs
#   that share leaves.

cdef class VersionCounter:
    cdef public long long value       # number of in-place writes to the guarded storage
    cdef readonly str last_op         # the in-place op that wrote last ("add_", "setitem")
    cdef readonly object last_trace   # where it was called from (anomaly mode), else None
    cdef public long long graph_epoch # number of *recorded* in-place writes (ones that gave the
                                      # storage's base a new node): a view whose graph was built
                                      # at another epoch is stale and is rebased before use


cdef class Device:
    cdef readonly str name            # "cpu", "cuda", ...: the key kernels are registered under
    cdef readonly object array_type   # the array class this device's kernels return


cdef class Op:
    cdef readonly str name            # public name, e.g. "exp"; also the kernel table key
    cdef readonly str plugin          # distribution/plugin that registered it
    cdef readonly dict kernels        # device name -> kernel(*arrays, **params) -> array
    cdef readonly object vjp          # vjp(g, ans, *inputs, **params) -> tuple, one per input
    cdef readonly object jvp          # forward-mode rule jvp(t, ans, *inputs, **params), or None
                                      # (forward mode then falls back to a double VJP; see
                                      # _forward.py)
    cdef readonly object batch        # vmap's batching rule batch(inputs, batched, **params)
                                      # or "elementwise" / "reduce", or None (a loop over
                                      # the batch; see _batching.py)
    cdef readonly int nin             # leading positional tensor inputs; -1: all positionals
    cdef readonly bint seq_input      # inputs arrive as one sequence (concatenate, stack)
    cdef readonly tuple params        # names that extra positional arguments bind to
    cdef readonly tuple differentiable  # input indexes that get gradients; () = none
    cdef readonly tuple not_implemented  # inputs with a derivative the rule lacks: refuse grad
    cdef readonly bint view           # output may alias input 0's storage (shares its version)
    cdef readonly bint twice_differentiable  # False: VJP is not itself differentiable
    cdef readonly list samples        # sample inputs for the contract kit
    cdef readonly str doc
    cdef readonly tuple save_inputs   # per input: does the VJP read it? None = all are read
    cdef readonly bint save_ans       # does the VJP read `ans`?
    cdef readonly object dim_keywords # PyTorch's dim=/keepdim= (see _dim_keywords.py): None:
                                      # passed on as given (the op takes no axis=, or has a
                                      # dim= of its own); else the DimKeywords that renames
                                      # them to axis=/keepdims= or refuses them
    cdef bint _save_no_inputs         # save_inputs=False: the VJP reads no input
    cdef bint _all_diff               # differentiable covers every input (fast path)
    cdef readonly int n_aux           # auxiliary arrays the kernel returns after the output
                                      # (register_op(aux=)); 0 for almost every op
    # Engine fast paths an op's plugin declares after registering it (Op._set_fast_paths; see
    # Note: [gradient fast paths] in _engine.pyx):
    cdef readonly tuple grad_passthrough  # per input: its gradient is `g` itself (before the
                                      # engine fits it to the input's shape); None: none is
    cdef readonly bint save_for_other # two inputs, each read by the rule only for the
                                      # OTHER's gradient: saved only when the other gets one
    cdef readonly Op vjp_op           # one input: the rule's gradient is vjp_op(g, ans) (or
                                      # vjp_op(g, x)) for real arrays outside recording: the
                                      # engine calls vjp_op's kernel itself; None: no such op
    cdef readonly bint vjp_op_reads_ans  # vjp_op's second argument is ans (else input 0)
    cdef readonly bint grad_times_number # two inputs, one a number c: the tensor's gradient
                                      # is g * c, which the engine computes without the rule
    cdef readonly bint vjp_matmul_2d  # matmul: for 2-D float ndarrays outside recording the
                                      # rule's gradients are np.matmul(g, y.T), np.matmul(x.T, g):
                                      # the engine makes the two calls itself (_matmul_2d_vjp)
    cdef void* _vectorcall            # CPython's vectorcall entry (see Note: [calling an op])
    cdef readonly bint supports_complex  # register_op(complex=True): the rules are complex-
                                      # correct (see Note: [complex tensors] in _engine.pyx)
    cdef bint saves_input(self, Py_ssize_t i)


cdef class Node:
    cdef readonly str name            # op (or Function class) name, for errors and repr
    cdef tuple edges                  # per input: Node, LeafRef (a leaf) or None (no gradient)
    cdef tuple edge_nrs               # per input: which output of the edge Node it was
    cdef tuple inputs                 # per input: SavedTensor (read by the rule), TensorMeta
                                      # (not read) or the plain value; None once freed
    cdef readonly int n_outputs
    cdef bint released                # saved values were freed by a backward without retain_graph
    cdef dict hooks                   # output_nr -> [hook]: tensor hooks on non-leaf outputs
    cdef dict retained                # output_nr -> weakref of a non-leaf that called retain_grad()
    cdef public object trace          # forward stack recorded in anomaly mode, else None
    # Traversal state, owned by one running backward (`_walk` is its token) and reset when
    # the node has run; a second backward reaching a node another one owns raises.
    cdef object _walk                 # token of the backward that owns the fields below
    cdef Py_ssize_t _deps             # edges into this node from nodes that have not run
    cdef object _g                    # gradient summed so far for output 0
    cdef list _gmore                  # gradients for outputs 1.. (multi-output nodes)
    cdef unsigned long long _fresh    # bit k: the gradient of output k is a buffer we own
    cdef tuple _run_vjp(self, list grads)  # the rule's raw gradients, one per input
    cdef void release(self)
    cdef void _check_saved(self) except *


cdef class OpNode(Node):
    cdef readonly Op op
    cdef dict params                  # the op's keyword parameters
    cdef object ans_data              # output array (saved by reference, not as a Tensor: no cycle)
    cdef VersionCounter ans_vc        # the output's version counter
    # Shape and dtype of the output, for reports (Node.output_meta). NOTE: kept as C ints,
    # not a tuple: a retained tuple per op costs the cyclic GC more than the whole record.
    cdef int out_ndim                 # -1: the shape is in out_shape_tuple instead
    cdef Py_ssize_t out_dims[8]
    cdef tuple out_shape_tuple        # for arrays that are not NumPy's or have > 8 dims
    cdef object out_dtype
    cdef long long ans_version        # its value when saved
    cdef Device device                # device of the output
    cdef tuple aux_data               # the kernel's auxiliary arrays (Op.n_aux > 0), handed to
                                      # the rule only when it is not recorded; None if none
                                      # (see Note: [auxiliary outputs] in _engine.pyx)
    cdef object ans_tangents          # the output's tangents (see TensorBase._tangents) when
                                      # it was recorded inside a forward level, else None
    cdef object _aux_tensors(self, bint recording)


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
    cdef object _leaf_ref             # the LeafRef graphs use for this leaf (created on need)
    # A view made by a view op (reshape, transpose, basic getitem) remembers how it was made,
    # so that when its base is modified in place by a recorded op its graph can be rebuilt
    # from the base's new node (see Note: [views of a base modified in place]).  Detached
    # aliases (detach()) have no parent: they never take part in a graph.
    cdef TensorBase _view_parent      # the tensor the view op was applied to, else None
    cdef Op _view_op                  # that op; None for a view made with grad mode off
    cdef dict _view_params            # its keyword parameters
    cdef long long _view_epoch        # _vc.graph_epoch when this view's graph was built
    # Forward mode (see _forward.py): {level id: tangent Tensor} while forward levels are
    # active, else None. A tangent is itself a Tensor, which may carry tangents of outer
    # (lower-id) levels. Saved values keep a reference to the same dict, so a backward run
    # inside the level sees the tangents of what its rules read (forward over reverse).
    # NOTE: nodes recorded inside a forward level stay GC-tracked: a tangent computed by a
    # recorded rule can reach its own dict again through its node (a cycle).
    cdef public object _tangents
    cdef object __weakref__
