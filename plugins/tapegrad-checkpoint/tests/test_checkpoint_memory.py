"""tg.memory.saved_bytes: what a graph keeps for backward, measured before running it."""

import numpy as np
import pytest
import tapegrad as tg

ck = tg.checkpoint


def _blocks(n, width, dtype=np.float64):
    tg.manual_seed(0)
    return tg.nn.Sequential(*[tg.nn.Sequential(tg.nn.Linear(width, width, dtype=dtype),
                                               tg.nn.Tanh()) for _ in range(n)])


def test_a_plain_mlp_keeps_each_tanh_output_its_input_and_its_weights():
    net = _blocks(4, 8)
    x = tg.random.randn(5, 8)
    report = tg.memory.saved_bytes(net(x))
    act, weight, bias = 5 * 8 * 8, 8 * 8 * 8, 8 * 8
    assert report.by_op == {"linear": act + 4 * (weight + bias), "tanh": 4 * act}
    assert report.nodes == {"linear": 4, "tanh": 4}
    assert report.parameters == 4 * (weight + bias)
    assert report.activations == 5 * act                 # 4 tanh outputs and the input
    assert report.total == report.activations + report.parameters
    assert report.arrays == 5 + 8


def test_under_sqrt_n_the_saved_activations_drop_by_the_expected_factor():
    """32 blocks: plain keeps 32 tanh outputs + the input (33 arrays); SqrtN (segments 6, 6,
    5, 5, 5, 5, the last plain) keeps the input, the outputs of segments 1-4 (inputs of
    2-5), the output of segment 5 (the input of the plain last segment) and that segment's
    5 tanh outputs: 11 arrays, a factor of 3. Every(4) keeps 12."""
    net = _blocks(32, 64, np.float32)
    x = tg.random.randn(16, 64, dtype=tg.float32)
    one = 16 * 64 * 4
    plain = tg.memory.saved_bytes(net(x))
    sqrt_n = tg.memory.saved_bytes(tg.checkpoint_sequential(net, x, ck.SqrtN()))
    every4 = tg.memory.saved_bytes(tg.checkpoint_sequential(net, x, ck.Every(4)))
    assert plain.activations == 33 * one
    assert sqrt_n.activations == 11 * one and sqrt_n.activations * 3 == plain.activations
    assert every4.activations == 12 * one
    assert sqrt_n.by_op["Checkpoint"] == 5 * one         # the 5 checkpointed inputs
    assert sqrt_n.nodes["Checkpoint"] == 5
    # without the plain last segment, only the 6 segment inputs and the output stay
    last_too = tg.memory.saved_bytes(
        tg.checkpoint_sequential(net, x, ck.SqrtN(checkpoint_last=True)))
    assert last_too.activations == 6 * one and last_too.parameters == 0


def test_the_report_matches_what_backward_frees():
    import tracemalloc
    net = _blocks(12, 128, np.float32)
    x = tg.random.randn(256, 128, dtype=tg.float32)
    for strategy in (None, ck.SqrtN()):
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            y = tg.checkpoint_sequential(net, x, strategy).sum()
            held = tracemalloc.get_traced_memory()[0] - base
            reported = tg.memory.saved_bytes(y).activations - x.numpy().nbytes
        finally:
            tracemalloc.stop()
        assert reported <= held < reported + 64 * 1024     # the rest: nodes and tensors


def test_an_array_kept_by_several_nodes_or_as_views_counts_once():
    x = tg.random.randn(100, requires_grad=True)         # 800 bytes
    e = tg.exp(x)                                        # exp keeps its output ...
    y = e * e                                            # ... multiply keeps it twice
    report = tg.memory.saved_bytes(y)
    assert report.total == 800 and report.arrays == 1
    assert report.by_op == {"exp": 800}                  # under the op that computed it
    assert report.parameters == 0                        # exp reads no input
    z = (e[:10] * e[50:60]).sum()                        # two views of one buffer
    assert tg.memory.saved_bytes(z).total == 800


def test_several_outputs_share_their_common_graph():
    x = tg.random.randn(50, requires_grad=True)
    h = tg.tanh(x)
    a, b = tg.exp(h), tg.sin(h)
    both = tg.memory.saved_bytes(a, b)        # exp's output, and h: tanh's output, sin's input
    assert both.total == 2 * 400 and both.by_op == {"exp": 400, "tanh": 400}
    assert tg.memory.saved_bytes([a, b]) == both
    assert both.nodes == {"exp": 1, "tanh": 1, "sin": 1}


def test_after_backward_nothing_is_kept():
    net = _blocks(3, 4)
    y = net(tg.random.randn(2, 4)).sum()
    assert tg.memory.saved_bytes(y).total > 0
    y.backward()
    after = tg.memory.saved_bytes(y)
    assert after.total == 0 and after.arrays == 0 and sum(after.nodes.values()) == 7


def test_a_leaf_or_constant_has_an_empty_report():
    report = tg.memory.saved_bytes(tg.ones(3, requires_grad=True))
    assert report.total == 0 and report.nodes == {} and report.by_op == {}


def test_a_deep_graph_is_walked_without_recursion():
    x = tg.random.randn(4, requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y + 0.0                                      # add keeps nothing
    y = tg.exp(y)
    report = tg.memory.saved_bytes(y)
    assert report.nodes == {"exp": 1, "add": 100_000}
    assert report.total == 32


def test_a_user_function_node_reports_what_its_ctx_saved():
    class Square(tg.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = tg.random.randn(10, requires_grad=True)
    report = tg.memory.saved_bytes(tg.exp(Square.apply(x)))
    assert report.total == 80 + 80                        # x (saved by Square) and exp's output
    assert report.nodes == {"exp": 1, "Square": 1}


def test_the_printed_table_lists_ops_with_nodes_arrays_and_bytes():
    net = _blocks(32, 64, np.float32)
    x = tg.random.randn(16, 64, dtype=tg.float32)
    text = str(tg.memory.saved_bytes(tg.checkpoint_sequential(net, x)))
    lines = text.splitlines()
    # 11 activations of 4 KiB, and the 5 plain Linear layers' weights and biases
    assert lines[0] == ("saved for backward: 125.2 KiB in 21 arrays, kept by 15 nodes "
                        "(81.2 KiB of it parameters)")
    assert lines[1].split() == ["op", "nodes", "arrays", "bytes"]
    assert lines[2].split()[:3] == ["linear", "5", "11"]
    assert lines[3].split()[:3] == ["Checkpoint", "5", "5"]
    assert tg.memory.format_bytes(512) == "512 B"
    assert tg.memory.format_bytes(3 * 2 ** 30) == "3.0 GiB"


def test_only_tensors_are_accepted():
    with pytest.raises(TypeError, match="argument 1 is ndarray"):
        tg.memory.saved_bytes(tg.ones(2), np.ones(2))
