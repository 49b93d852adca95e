"""TensorFlow / Keras max-pool gradients lowered to StableHLO (run in a TensorFlow venv).

Run by ``scripts/lower_fixtures.py --frontend tensorflow --python <venv>/bin/python``
(see docs/frontends.md for the venv); standalone::

    /work/venv-tf/bin/python scripts/frontends/tensorflow_cases.py OUT.json [NAME ...]

writes a JSON list, one object per case: name, description, source,
expected_pool_gradients, negative, notes, expected_remarks, forward_in_program,
text (the StableHLO module) and versions. Each case is a ``tf.function`` with
``jit_compile=True`` whose StableHLO comes from
``fn.experimental_get_compiler_ir(*args)(stage="stablehlo")``: what tf2xla
gives XLA (attribute padding on the raw operand, ``compare GE`` without a
compare type, SAME/VALID padding, NDHWC or NCDHW windows).
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np
import tensorflow as tf

from case_runner import CaseList, main  # this folder: the script's own

CASES = CaseList("tensorflow")
case = CASES.case


def rand(shape, dtype=tf.float32, seed=0):
    return tf.cast(tf.constant(np.random.default_rng(seed).standard_normal(shape), tf.float32), dtype)


def sq_loss(y):
    return tf.reduce_sum(tf.square(tf.cast(y, tf.float32)))


def grad_of(pool, shape, dtype=tf.float32, loss=sq_loss):
    def build():
        def fn(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                l = loss(pool(x))
            return tape.gradient(l, x)
        return fn, (rand(shape, dtype),)
    return build


def p3(k, s, padding, fmt="NDHWC"):
    return lambda x: tf.nn.max_pool3d(x, k, s, padding, data_format=fmt)


def p2(k, s, padding, fmt="NHWC"):
    return lambda x: tf.nn.max_pool2d(x, k, s, padding, data_format=fmt)


G = "tape.gradient(sum(max_pool3d(x)**2), x)"
case("tf_max_pool3d_ndhwc_k2s2_valid_f32", f"{G}, NDHWC (2,6,6,6,3), k2 s2 VALID")(
    grad_of(p3(2, 2, "VALID"), (2, 6, 6, 6, 3)))
case("tf_max_pool3d_ndhwc_k2s2_valid_odd7_f32", f"{G}, NDHWC (2,7,7,7,3), k2 s2 VALID (last plane dropped)")(
    grad_of(p3(2, 2, "VALID"), (2, 7, 7, 7, 3)))
case("tf_max_pool3d_ndhwc_k2s2_same_even6_f32", f"{G}, NDHWC (2,6,6,6,3), k2 s2 SAME, even size: no padding")(
    grad_of(p3(2, 2, "SAME"), (2, 6, 6, 6, 3)))
case("tf_max_pool3d_ndhwc_k2s2_same_odd7_f32", f"{G}, NDHWC (2,7,7,7,3), k2 s2 SAME, odd size: padding (0,1)",
     notes="asymmetric attribute padding (0,1): XLA:CPU gives some tied windows' gradient to a later maximum")(
    grad_of(p3(2, 2, "SAME"), (2, 7, 7, 7, 3)))
case("tf_max_pool3d_ndhwc_k3s2_same_odd7_f32", f"{G}, NDHWC (2,7,7,7,3), k3 s2 SAME: padding (1,1), overlap")(
    grad_of(p3(3, 2, "SAME"), (2, 7, 7, 7, 3)))
case("tf_max_pool3d_ndhwc_k3s2_same_even8_f32", f"{G}, NDHWC (2,8,8,8,3), k3 s2 SAME: padding (0,1), overlap")(
    grad_of(p3(3, 2, "SAME"), (2, 8, 8, 8, 3)))
case("tf_max_pool3d_ndhwc_k3s1_same_f32", f"{G}, NDHWC (2,5,5,5,3), k3 s1 SAME: padding (1,1), heavy overlap")(
    grad_of(p3(3, 1, "SAME"), (2, 5, 5, 5, 3)))
case("tf_max_pool3d_ndhwc_k2s1_same_f32", f"{G}, NDHWC (2,5,5,5,3), k2 s1 SAME: padding (0,1), overlap")(
    grad_of(p3(2, 1, "SAME"), (2, 5, 5, 5, 3)))
case("tf_max_pool3d_ndhwc_k123_s122_same_f32",
     f"{G}, NDHWC (2,4,7,9,3), anisotropic ksize (1,2,3) strides (1,2,2) SAME")(
    grad_of(p3((1, 2, 3), (1, 2, 2), "SAME"), (2, 4, 7, 9, 3)))
case("tf_max_pool3d_ncdhw_k2s2_same_odd7_f32",
     f"{G}, NCDHW (2,3,7,7,7), k2 s2 SAME: padding (0,1)",
     notes="NCDHW max_pool3d: TF's eager CPU kernels reject it (\"Default MaxPooling3dGradOp only supports "
           "NDHWC on device type CPU\"); under jit_compile=True tf2xla lowers it, window (1,1,2,2,2)")(
    grad_of(p3(2, 2, "SAME", "NCDHW"), (2, 3, 7, 7, 7)))
case("tf_max_pool3d_ncdhw_k3s2_valid_f32", f"{G}, NCDHW (2,3,7,7,7), k3 s2 VALID, overlap (jit only, see above)")(
    grad_of(p3(3, 2, "VALID", "NCDHW"), (2, 3, 7, 7, 7)))
case("tf_max_pool3d_ndhwc_k3s2_same_bf16", f"{G}, NDHWC (2,7,7,7,3) bf16, k3 s2 SAME: padding (1,1)")(
    grad_of(p3(3, 2, "SAME"), (2, 7, 7, 7, 3), tf.bfloat16))
case("tf_max_pool3d_ndhwc_k2s2_same_odd7_f16", f"{G}, NDHWC (2,7,7,7,3) f16, k2 s2 SAME: padding (0,1)")(
    grad_of(p3(2, 2, "SAME"), (2, 7, 7, 7, 3), tf.float16))
case("tf_max_pool3d_ndhwc_k2s2_valid_bf16", f"{G}, NDHWC (2,6,6,6,3) bf16, k2 s2 VALID")(
    grad_of(p3(2, 2, "VALID"), (2, 6, 6, 6, 3), tf.bfloat16))
case("tf_max_pool2d_nhwc_k3s2_same_f32", "tape.gradient(sum(max_pool2d(x)**2), x), NHWC (2,9,9,3), k3 s2 SAME")(
    grad_of(p2(3, 2, "SAME"), (2, 9, 9, 3)))
case("tf_max_pool2d_nchw_k2s2_same_odd_f32",
     "tape.gradient(sum(max_pool2d(x)**2), x), NCHW (2,3,7,7), k2 s2 SAME: padding (0,1) (jit only)")(
    grad_of(p2(2, 2, "SAME", "NCHW"), (2, 3, 7, 7)))
case("tf_max_pool3d_sum_loss_k2s2_same_odd7_f32",
     "tape.gradient(sum(max_pool3d(x)), x), NDHWC (2,7,7,7,3), k2 s2 SAME: cotangent all ones, so every "
     "window's gradient is 1 and a tie given to another element shows; the forward stays (MaxPool3DGrad "
     "takes orig_output)")(
    grad_of(p3(2, 2, "SAME"), (2, 7, 7, 7, 3), loss=lambda y: tf.reduce_sum(y)))


def _keras_step(pool_kwargs, in_shape, channels_first=False):
    def build():
        import keras

        fmt = "channels_first" if channels_first else "channels_last"
        model = keras.Sequential([
            keras.Input(in_shape[1:]),
            keras.layers.Conv3D(4, 3, padding="same", activation="relu", data_format=fmt),
            keras.layers.MaxPooling3D(data_format=fmt, **pool_kwargs),
            keras.layers.Flatten(),
            keras.layers.Dense(3),
        ])
        opt = keras.optimizers.SGD(0.1)

        def step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((model(x, training=True) - y) ** 2)
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        return step, (rand(in_shape), rand((in_shape[0], 3), seed=1))
    return build


case("keras_maxpooling3d_train_step_f32",
     "Keras Sequential Conv3D(relu)-MaxPooling3D(2)-Flatten-Dense, SGD train step (apply_gradients), "
     "x (2,6,6,6,2) channels_last; variables are arguments and results", source="keras")(
    _keras_step(dict(pool_size=2), (2, 6, 6, 6, 2)))
case("keras_maxpooling3d_same_train_step_f32",
     "Keras Conv3D(relu)-MaxPooling3D(pool 3, strides 2, SAME)-Flatten-Dense, SGD train step, "
     "x (2,7,7,7,2) channels_last: padding (1,1), overlap", source="keras")(
    _keras_step(dict(pool_size=3, strides=2, padding="same"), (2, 7, 7, 7, 2)))
case("keras_maxpooling3d_channels_first_same_train_step_f32",
     "Keras Conv3D-MaxPooling3D(pool 2, SAME) channels_first, SGD train step, x (2,2,7,7,7): padding (0,1)",
     source="keras")(
    _keras_step(dict(pool_size=2, padding="same"), (2, 2, 7, 7, 7), channels_first=True))


@case("tf_max_pool3d_second_order_f32",
      "second order: tape.gradient(sum(g**2), x) where g = tape.gradient(sum(max_pool3d(x)**2), x); "
      "NDHWC (2,6,6,6,3) k2 s2 VALID. Two select_and_scatter (MaxPool3DGrad and the gradient through "
      "the forward output) and MaxPool3DGradGrad's bit-packing reduce_windows",
      expected=2,
      notes="tf2xla lowers MaxPool3DGradGrad as reduce_window over values with the window position "
            "packed into the low mantissa bits (select GE on the packed values): the pass must leave "
            "those reduce_windows alone")
def _second_order():
    def fn(x):
        with tf.GradientTape() as t2:
            t2.watch(x)
            with tf.GradientTape() as t1:
                t1.watch(x)
                l1 = sq_loss(tf.nn.max_pool3d(x, 2, 2, "VALID"))
            g = t1.gradient(l1, x)
            l2 = tf.reduce_sum(g * g)
        return t2.gradient(l2, x)
    return fn, (rand((2, 6, 6, 6, 3)),)


@case("neg_tf_max_pool3d_grad_grad_op_f32",
      "tf.raw_ops.MaxPool3DGradGrad(orig_input, orig_output, grad), NDHWC (2,6,6,6,3) k2 s2 VALID: the "
      "second-order max-pool gradient alone",
      expected=0, forward=False,
      negative="second-order max-pool gradient: a bit-packing reduce_window, no select_and_scatter")
def _gradgrad_op():
    def fn(x, y, g):
        return tf.raw_ops.MaxPool3DGradGrad(orig_input=x, orig_output=y, grad=g, ksize=[1, 2, 2, 2, 1],
                                            strides=[1, 2, 2, 2, 1], padding="VALID")
    x = rand((2, 6, 6, 6, 3))
    return fn, (x, tf.nn.max_pool3d(x, 2, 2, "VALID"), rand((2, 6, 6, 6, 3), seed=1))


case("neg_tf_max_pool2d_f64",
     "tape.gradient(sum(max_pool2d(x)**2), x), NHWC (2,7,7,3) f64, k2 s2 SAME (tf.nn.max_pool3d has no "
     "f64 kernel: TypeError)", expected=0,
     negative="f64: the kernel is f32/bf16/f16; the select_and_scatter stays, with a remark",
     remarks=["element type f64"])(
    grad_of(p2(2, 2, "SAME"), (2, 7, 7, 3), tf.float64))
case("neg_tf_avg_pool3d_f32",
     "tape.gradient(sum(avg_pool3d(x)**2), x), NDHWC (2,6,6,6,3), k2 s2 VALID", expected=0, forward=False,
     negative="average pooling: no select_and_scatter")(
    grad_of(lambda x: tf.nn.avg_pool3d(x, 2, 2, "VALID"), (2, 6, 6, 6, 3)))


def lower(c) -> str:
    fn, args = c["build"]()
    return tf.function(fn, jit_compile=True).experimental_get_compiler_ir(*args)(stage="stablehlo")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], CASES, lower, ("tensorflow-cpu", "keras")))
