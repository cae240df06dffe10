"""The contract kit over every op and function installed in this environment."""

import numpy as np
import pytest
import tapegrad as tg
import tapegrad.testing as tgt

REGISTRY = tg.registry()
ENTRIES = sorted(REGISTRY.ops) + sorted(REGISTRY.functions)

ELEMENTWISE = ("subtract multiply divide negative power exp log sqrt abs clip tanh sigmoid relu "
               "sin cos maximum minimum where equal not_equal less less_equal greater "
               "greater_equal tan sinh cosh arcsin arccos arctan arcsinh arccosh arctanh arctan2 "
               "hypot sinc deg2rad radians rad2deg degrees log1p expm1 log2 log10 exp2 logaddexp "
               "logaddexp2 reciprocal cbrt fmax fmin floor ceil trunc rint round around remainder "
               "mod fmod floor_divide divmod copysign heaviside isnan isinf isfinite signbit "
               "nan_to_num absolute true_divide acos acosh asin asinh atan atan2 atanh pow positive "
               "fabs fix float_power").split()
SHAPE = ("sum mean max min var reshape transpose flatten getitem setitem concatenate stack "
         "split tensordot outer inner kron trace diag diagonal tril triu cumsum cumprod sort "
         "argsort repeat tile roll flip fliplr flipud pad take take_along_axis "
         "put_along_axis "
         "append hstack vstack dstack column_stack row_stack array_split hsplit vsplit dsplit "
         "atleast_1d atleast_2d atleast_3d gradient diff any all amax amin nansum nanmean "
         "nanvar nanstd average ptp median quantile percentile nanmedian nanquantile "
         "nanpercentile "
         "convolve correlate cov corrcoef ediff1d geomspace logspace interp ldexp modf "
         "trapezoid unwrap vander "
         "concat permute_dims rollaxis matrix_transpose cumulative_sum "
         "cumulative_prod nancumsum nancumprod nanmax nanmin nanprod block broadcast_arrays "
         "choose compress delete diagflat extract insert meshgrid partition piecewise resize "
         "rot90 select trim_zeros unstack "
         "copyto fill_diagonal place put putmask").split()
LINALG = ("matmul dot einsum cross linalg_cholesky linalg_cond linalg_cross linalg_det linalg_eig "
          "linalg_eigh linalg_eigvals linalg_eigvalsh linalg_inv linalg_lstsq "
          "linalg_matrix_norm linalg_matrix_power linalg_matrix_rank "
          "linalg_matrix_transpose linalg_multi_dot linalg_norm linalg_outer linalg_pinv "
          "linalg_qr linalg_slogdet linalg_solve linalg_svd linalg_svdvals linalg_tensorinv "
          "linalg_tensorsolve linalg_vecdot linalg_vector_norm "
          "poly polyadd polyder polydiv polyfit polyint polymul polysub polyval "
          "matvec vdot vecdot vecmat").split()
NN = ("softmax log_softmax logsumexp cross_entropy mse_loss "
      "binary_cross_entropy_with_logits "
      "_conv _conv_transpose _conv_weight conv1d conv2d conv3d conv_transpose1d conv_transpose2d"
      " _standardize _rms_scale _standardize_grad _rms_scale_grad"
      " layer_norm rms_norm group_norm batch_norm instance_norm normalize "
      "gelu silu mish elu selu celu leaky_relu prelu relu6 hardtanh hardsigmoid hardswish "
      "softplus softsign logsigmoid log_sigmoid tanhshrink glu softmin "
      "_normal_cdf "
      "_gelu_backward _lstm_sequence _lstm_sequence_backward "
      "_gru_sequence _gru_sequence_backward "
      "nll_loss l1_loss smooth_l1_loss huber_loss binary_cross_entropy cosine_similarity "
      "cosine_embedding_loss margin_ranking_loss hinge_embedding_loss pairwise_distance "
      "triplet_margin_loss poisson_nll_loss gaussian_nll_loss"
      " embedding masked_fill scaled_dot_product_attention"
      " max_pool1d max_pool2d avg_pool1d avg_pool2d adaptive_avg_pool1d adaptive_avg_pool2d"
      " adaptive_max_pool2d unfold fold pixel_shuffle pixel_unshuffle interpolate upsample"
      " _unfold _fold _max_pool_indices _adaptive_max_pool_indices").split()


def test_no_plugin_failed_to_load():
    assert REGISTRY.failed == {}


@pytest.mark.parametrize("plugin,names", [("tapegrad-elementwise", ELEMENTWISE),
                                          ("tapegrad-shape", SHAPE),
                                          ("tapegrad-linalg", LINALG),
                                          ("tapegrad-nn", NN)])
def test_first_party_plugins_provide_every_design_op(plugin, names):
    assert plugin in REGISTRY.plugins
    provided = {n for n, op in REGISTRY.ops.items() if op.plugin == plugin}
    provided |= {n for n, f in REGISTRY.functions.items() if f.plugin == plugin}
    assert set(names) <= provided, sorted(set(names) - provided)


@pytest.mark.parametrize("name", ENTRIES)
def test_every_installed_op_keeps_the_contract(name):
    report = tgt.check_op(name)
    assert report.checks, f"{name}: no check ran"


def test_every_op_registers_samples():
    missing = [n for n, op in REGISTRY.ops.items() if not op.samples]
    assert missing == []


def test_every_differentiable_op_is_gradchecked_with_a_broadcast_sample_when_binary():
    for name, op in REGISTRY.ops.items():
        if op.vjp is None or op.nin != 2:
            continue
        if op.differentiable is not None and len(op.differentiable) < 2:
            continue        # (g, indices) ops such as _take_grad: the index does not broadcast
        shapes = [tuple(np.shape(a) for a in s.args) for s in op.samples]
        assert any(len(set(pair)) > 1 for pair in shapes), f"{name} has no broadcasting sample"
