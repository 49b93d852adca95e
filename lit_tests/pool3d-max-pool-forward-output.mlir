// RUN: pool3d-opt %s --split-input-file --target=cpu | FileCheck %s
// RUN: pool3d-opt %s --split-input-file --target=cpu --remarks 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK
// RUN: pool3d-opt %s --split-input-file | FileCheck %s --check-prefix=NEUTRAL

// A forward max pool with no gradient (inference) becomes the forward-output
// call where the platform's binding accepts the configuration (on CPU: where
// its kernel was measured faster than XLA's reduce_window). Neutral output
// never gets it anywhere in the output: every reduce_window stays.
// NEUTRAL-NOT: pool3d.max_pooling_3d_forward_output
// NEUTRAL: stablehlo.reduce_window
// NEUTRAL-NOT: pool3d.max_pooling_3d_forward_output

// -----

// CHECK-LABEL: func.func @inference_forward_becomes_the_forward_output_call
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x8x8x8xf32>)
// CHECK-NOT: stablehlo.reduce_window
// CHECK: %[[Y:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_forward_output(%[[X]])
// CHECK-SAME: data_format = "NCDHW", kernel_size = dense<3> : tensor<3xi64>, output_format = "NCDHW", padding = dense<1> : tensor<3xi64>, stride = dense<2> : tensor<3xi64>
// CHECK-SAME: (tensor<2x3x8x8x8xf32>) -> tensor<2x3x4x4x4xf32>
// CHECK-NOT: stablehlo.reduce_window
// CHECK: return %[[Y]]
// REMARK: pool3d-max-pool-forward-output.mlir:[[# @LINE + 3]]:8: remark: max-pool forward without gradient rewritten: NCDHW kernel_size=[3, 3, 3] stride=[2, 2, 2] padding=[1, 1, 1], f32, forward-output call
func.func @inference_forward_becomes_the_forward_output_call(%x: tensor<2x3x8x8x8xf32>) -> tensor<2x3x4x4x4xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %y = "stablehlo.reduce_window"(%x, %ninf) <{padding = dense<[[0, 0], [0, 0], [1, 1], [1, 1], [1, 1]]> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) : (tensor<2x3x8x8x8xf32>, tensor<f32>) -> tensor<2x3x4x4x4xf32>
  return %y : tensor<2x3x4x4x4xf32>
}

// -----

// torch-xla's form: an explicit -inf pad feeding the reduce_window. The pad
// is the call's padding and goes with the reduce_window.

// CHECK-LABEL: func.func @explicit_pad_forward_becomes_the_call
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x4x4x16xbf16>)
// CHECK-NOT: stablehlo.pad
// CHECK: stablehlo.custom_call @pool3d.max_pooling_3d_forward_output(%[[X]])
// CHECK-SAME: data_format = "NDHWC", kernel_size = dense<3> : tensor<3xi64>, output_format = "NDHWC", padding = dense<1> : tensor<3xi64>, stride = dense<2> : tensor<3xi64>
// CHECK-NOT: stablehlo.reduce_window
func.func @explicit_pad_forward_becomes_the_call(%x: tensor<2x4x4x4x16xbf16>) -> tensor<2x2x2x2x16xbf16> {
  %ninf = stablehlo.constant dense<0xFF80> : tensor<bf16>
  %p = stablehlo.pad %x, %ninf, low = [0, 1, 1, 1, 0], high = [0, 1, 1, 1, 0], interior = [0, 0, 0, 0, 0] : (tensor<2x4x4x4x16xbf16>, tensor<bf16>) -> tensor<2x6x6x6x16xbf16>
  %y = "stablehlo.reduce_window"(%p, %ninf) <{window_dimensions = array<i64: 1, 3, 3, 3, 1>, window_strides = array<i64: 1, 2, 2, 2, 1>}> ({
  ^bb0(%a: tensor<bf16>, %b: tensor<bf16>):
    %m = stablehlo.maximum %a, %b : tensor<bf16>
    stablehlo.return %m : tensor<bf16>
  }) : (tensor<2x6x6x6x16xbf16>, tensor<bf16>) -> tensor<2x2x2x2x16xbf16>
  return %y : tensor<2x2x2x2x16xbf16>
}

// -----

// Channels-last windows that do not overlap (any element type): XLA's
// vectorised reduce_window, fused with the pool's producer in a model, was
// measured faster, so it stays, with a remark.

// CHECK-LABEL: func.func @channels_last_without_overlap_is_left_to_xla
// CHECK-NOT: pool3d.max_pooling_3d_forward_output
// CHECK: stablehlo.reduce_window
// REMARK: pool3d-max-pool-forward-output.mlir:[[# @LINE + 3]]:8: remark: max-pool forward without gradient not rewritten: cpu binding: XLA's reduce_window measured faster inside a model on channels-last windows that do not overlap
func.func @channels_last_without_overlap_is_left_to_xla(%x: tensor<2x4x4x4x32xf32>) -> tensor<2x2x2x2x32xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %y = "stablehlo.reduce_window"(%x, %ninf) <{window_dimensions = array<i64: 1, 2, 2, 2, 1>, window_strides = array<i64: 1, 2, 2, 2, 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) : (tensor<2x4x4x4x32xf32>, tensor<f32>) -> tensor<2x2x2x2x32xf32>
  return %y : tensor<2x2x2x2x32xf32>
}

// -----

// Min pooling (minimum, +inf) is not a max pool: untouched, no remark.

// CHECK-LABEL: func.func @min_pool_is_untouched
// CHECK-NOT: pool3d.
// CHECK: stablehlo.reduce_window
// CHECK: stablehlo.minimum
// REMARK-NOT: remark:
func.func @min_pool_is_untouched(%x: tensor<2x3x8x8x8xf32>) -> tensor<2x3x4x4x4xf32> {
  %inf = stablehlo.constant dense<0x7F800000> : tensor<f32>
  %y = "stablehlo.reduce_window"(%x, %inf) <{window_dimensions = array<i64: 1, 1, 2, 2, 2>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.minimum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) : (tensor<2x3x8x8x8xf32>, tensor<f32>) -> tensor<2x3x4x4x4xf32>
  return %y : tensor<2x3x4x4x4xf32>
}
