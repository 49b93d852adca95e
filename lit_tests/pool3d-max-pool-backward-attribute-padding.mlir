// RUN: pool3d-opt %s --split-input-file | FileCheck %s
// RUN: pool3d-opt %s --split-input-file --remarks -o %t.mlir 2>&1 | FileCheck %s --check-prefix=REMARK

// The TPU / torch-xla / TensorFlow form: padding on the op's attribute, the raw
// input as operand, no pad and no slice around the op.

// Symmetric padding on the attribute goes to the kernel's padding as is; no
// pad, no slice. The inserted forward max-pool has the same padding and a new
// -inf constant as init.

// CHECK-LABEL: func.func @symmetric_p1_folds_into_kernel_f32
// CHECK-SAME: (%[[X:.*]]: tensor<1x2x6x6x6xf32>, %[[G:.*]]: tensor<1x2x3x3x3xf32>)
// CHECK: %[[NINF:.*]] = stablehlo.constant dense<0xFF800000> : tensor<f32>
// CHECK-NOT: stablehlo.pad
// CHECK: %[[Y:.*]] = "stablehlo.reduce_window"(%[[X]], %[[NINF]])
// CHECK-SAME: padding = dense<{{\[\[}}0, 0], [0, 0], [1, 1], [1, 1], [1, 1]]>
// CHECK: %[[DX:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_backward(%[[G]], %[[X]], %[[Y]])
// CHECK-SAME: api_version = 4 : i32, backend_config = {data_format = "NCDHW", kernel_size = dense<3> : tensor<3xi64>, output_format = "NCDHW", padding = dense<1> : tensor<3xi64>, stride = dense<2> : tensor<3xi64>
// CHECK-SAME: -> tensor<1x2x6x6x6xf32>
// CHECK-NOT: stablehlo.select_and_scatter
// CHECK-NOT: stablehlo.slice
// CHECK: return %[[DX]]
func.func @symmetric_p1_folds_into_kernel_f32(%x: tensor<1x2x6x6x6xf32>, %g: tensor<1x2x3x3x3xf32>) -> tensor<1x2x6x6x6xf32> {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%x, %g, %zero) <{padding = dense<[[0, 0], [0, 0], [1, 1], [1, 1], [1, 1]]> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<1x2x6x6x6xf32>, tensor<1x2x3x3x3xf32>, tensor<f32>) -> tensor<1x2x6x6x6xf32>
  return %s : tensor<1x2x6x6x6xf32>
}

// -----

// NDHWC with a forward reduce_window of the same window and padding: reused as the
// call's third operand, nothing inserted.

// CHECK-LABEL: func.func @symmetric_ndhwc_forward_reused_f32
// CHECK-SAME: (%[[X:.*]]: tensor<1x6x6x6x2xf32>, %[[G:.*]]: tensor<1x3x3x3x2xf32>)
// CHECK: %[[Y:.*]] = "stablehlo.reduce_window"(%[[X]], %{{.*}})
// CHECK-NOT: stablehlo.reduce_window
// CHECK-NOT: stablehlo.pad
// CHECK: %[[DX:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_backward(%[[G]], %[[X]], %[[Y]])
// CHECK-SAME: api_version = 4 : i32, backend_config = {data_format = "NDHWC", kernel_size = dense<3> : tensor<3xi64>, output_format = "NDHWC", padding = dense<1> : tensor<3xi64>, stride = dense<2> : tensor<3xi64>
// CHECK-NOT: stablehlo.select_and_scatter
// CHECK-NOT: stablehlo.slice
// CHECK: return %[[DX]]
func.func @symmetric_ndhwc_forward_reused_f32(%x: tensor<1x6x6x6x2xf32>, %g: tensor<1x3x3x3x2xf32>) -> tensor<1x6x6x6x2xf32> {
  %init = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %y = "stablehlo.reduce_window"(%x, %init) <{padding = dense<[[0, 0], [1, 1], [1, 1], [1, 1], [0, 0]]> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 3, 3, 3, 1>, window_strides = array<i64: 1, 2, 2, 2, 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) : (tensor<1x6x6x6x2xf32>, tensor<f32>) -> tensor<1x3x3x3x2xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%x, %g, %zero) <{padding = dense<[[0, 0], [1, 1], [1, 1], [1, 1], [0, 0]]> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 3, 3, 3, 1>, window_strides = array<i64: 1, 2, 2, 2, 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<1x6x6x6x2xf32>, tensor<1x3x3x3x2xf32>, tensor<f32>) -> tensor<1x6x6x6x2xf32>
  return %s : tensor<1x6x6x6x2xf32>
}

// -----

// Padding (0, 1), larger on the HIGH side (TF/XLA SAME with an even window): the
// symmetric part (0) goes to the kernel, the remainder becomes an explicit -inf
// pad after x (never first in a window, so it is selected only where the original
// selects nothing) and a slice cuts it off the result.

// CHECK-LABEL: func.func @asymmetric_high_keeps_pad_and_slice_f32
// CHECK-SAME: (%[[X:.*]]: tensor<1x2x6x6x6xf32>, %[[G:.*]]: tensor<1x2x6x6x6xf32>)
// CHECK: %[[NINF:.*]] = stablehlo.constant dense<0xFF800000> : tensor<f32>
// CHECK: %[[XP:.*]] = stablehlo.pad %[[X]], %[[NINF]], low = [0, 0, 0, 0, 0], high = [0, 0, 1, 1, 1], interior = [0, 0, 0, 0, 0]
// CHECK-SAME: -> tensor<1x2x7x7x7xf32>
// CHECK: %[[Y:.*]] = "stablehlo.reduce_window"(%[[X]], %[[NINF]])
// CHECK-SAME: padding = dense<{{\[\[}}0, 0], [0, 0], [0, 1], [0, 1], [0, 1]]>
// CHECK: %[[DXP:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_backward(%[[G]], %[[XP]], %[[Y]])
// CHECK-SAME: api_version = 4 : i32, backend_config = {data_format = "NCDHW", kernel_size = dense<2> : tensor<3xi64>, output_format = "NCDHW", padding = dense<0> : tensor<3xi64>, stride = dense<1> : tensor<3xi64>
// CHECK-SAME: -> tensor<1x2x7x7x7xf32>
// CHECK: %[[DX:.*]] = stablehlo.slice %[[DXP]] [0:1, 0:2, 0:6, 0:6, 0:6] : (tensor<1x2x7x7x7xf32>) -> tensor<1x2x6x6x6xf32>
// CHECK-NOT: stablehlo.select_and_scatter
// CHECK: return %[[DX]]
func.func @asymmetric_high_keeps_pad_and_slice_f32(%x: tensor<1x2x6x6x6xf32>, %g: tensor<1x2x6x6x6xf32>) -> tensor<1x2x6x6x6xf32> {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%x, %g, %zero) <{padding = dense<[[0, 0], [0, 0], [0, 1], [0, 1], [0, 1]]> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 2, 2, 2>, window_strides = array<i64: 1, 1, 1, 1, 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<1x2x6x6x6xf32>, tensor<1x2x6x6x6xf32>, tensor<f32>) -> tensor<1x2x6x6x6xf32>
  return %s : tensor<1x2x6x6x6xf32>
}

// -----

// Padding (1, 2), (1, 2), (1, 1): the common part 1 goes to the kernel, only the
// excess high 1 on D and H stays an explicit pad. bf16 -inf is 0xFF80.

// CHECK-LABEL: func.func @asymmetric_mixed_folds_common_part_bf16
// CHECK-SAME: (%[[X:.*]]: tensor<1x2x6x6x6xbf16>, %[[G:.*]]: tensor<1x2x4x4x3xbf16>)
// CHECK: %[[NINF:.*]] = stablehlo.constant dense<0xFF80> : tensor<bf16>
// CHECK: %[[XP:.*]] = stablehlo.pad %[[X]], %[[NINF]], low = [0, 0, 0, 0, 0], high = [0, 0, 1, 1, 0], interior = [0, 0, 0, 0, 0]
// CHECK-SAME: -> tensor<1x2x7x7x6xbf16>
// CHECK: %[[Y:.*]] = "stablehlo.reduce_window"(%[[X]], %[[NINF]])
// CHECK-SAME: padding = dense<{{\[\[}}0, 0], [0, 0], [1, 2], [1, 2], [1, 1]]>
// CHECK: %[[DXP:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_backward(%[[G]], %[[XP]], %[[Y]])
// CHECK-SAME: api_version = 4 : i32, backend_config = {data_format = "NCDHW", kernel_size = dense<3> : tensor<3xi64>, output_format = "NCDHW", padding = dense<1> : tensor<3xi64>, stride = dense<2> : tensor<3xi64>
// CHECK-SAME: (tensor<1x2x4x4x3xbf16>, tensor<1x2x7x7x6xbf16>, tensor<1x2x4x4x3xbf16>) -> tensor<1x2x7x7x6xbf16>
// CHECK: %[[DX:.*]] = stablehlo.slice %[[DXP]] [0:1, 0:2, 0:6, 0:6, 0:6] : (tensor<1x2x7x7x6xbf16>) -> tensor<1x2x6x6x6xbf16>
// CHECK-NOT: stablehlo.select_and_scatter
// CHECK: return %[[DX]]
func.func @asymmetric_mixed_folds_common_part_bf16(%x: tensor<1x2x6x6x6xbf16>, %g: tensor<1x2x4x4x3xbf16>) -> tensor<1x2x6x6x6xbf16> {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
  %s = "stablehlo.select_and_scatter"(%x, %g, %zero) <{padding = dense<[[0, 0], [0, 0], [1, 2], [1, 2], [1, 1]]> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<bf16>, %b: tensor<bf16>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<bf16>, tensor<bf16>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<bf16>, %b: tensor<bf16>):
    %c = stablehlo.add %a, %b : tensor<bf16>
    stablehlo.return %c : tensor<bf16>
  }) : (tensor<1x2x6x6x6xbf16>, tensor<1x2x4x4x3xbf16>, tensor<bf16>) -> tensor<1x2x6x6x6xbf16>
  return %s : tensor<1x2x6x6x6xbf16>
}

// -----

// Padding (1, 0), larger on the LOW side: the remainder would have to be an
// explicit -inf pad in front of x, first in every window, and could be selected
// where the original (padding on the attribute) never selects padding. Not
// rewritten; kept last so its remark follows the rewrite remarks.

// CHECK-LABEL: func.func @asymmetric_low_not_rewritten_f32
// CHECK-NOT: stablehlo.custom_call
// CHECK-NOT: stablehlo.pad
// CHECK: "stablehlo.select_and_scatter"
// CHECK-SAME: padding = dense<{{\[\[}}0, 0], [0, 0], [1, 0], [1, 0], [1, 0]]>
// CHECK-NOT: stablehlo.custom_call
// CHECK-NOT: stablehlo.slice
// REMARK: pool3d-max-pool-backward-attribute-padding.mlir:[[# @LINE + 4]]:8: remark: max-pool gradient not rewritten:
// REMARK-SAME: larger on the low side than the high side
func.func @asymmetric_low_not_rewritten_f32(%x: tensor<1x2x6x6x6xf32>, %g: tensor<1x2x6x6x6xf32>) -> tensor<1x2x6x6x6xf32> {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%x, %g, %zero) <{padding = dense<[[0, 0], [0, 0], [1, 0], [1, 0], [1, 0]]> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 2, 2, 2>, window_strides = array<i64: 1, 1, 1, 1, 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<1x2x6x6x6xf32>, tensor<1x2x6x6x6xf32>, tensor<f32>) -> tensor<1x2x6x6x6xf32>
  return %s : tensor<1x2x6x6x6xf32>
}

// -----

// A parallel dimension between pooled ones is pooled as a unit window:
// window (1, 1, 2, 1, 2) becomes kernel_size [2, 1, 2].

// CHECK-LABEL: func.func @parallel_dim_between_pooled_dims
// CHECK-SAME: (%[[X:.*]]: tensor<1x2x4x3x4xf32>, %[[G:.*]]: tensor<1x2x2x3x2xf32>)
// CHECK: %[[Y:.*]] = "stablehlo.reduce_window"(%[[X]], %{{.*}})
// CHECK: %[[DX:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_backward(%[[G]], %[[X]], %[[Y]])
// CHECK-SAME: backend_config = {data_format = "NCDHW", kernel_size = dense<[2, 1, 2]> : tensor<3xi64>, output_format = "NCDHW", padding = dense<0> : tensor<3xi64>, stride = dense<[2, 1, 2]> : tensor<3xi64>}
// CHECK-NOT: stablehlo.select_and_scatter
// CHECK: return %[[DX]]
func.func @parallel_dim_between_pooled_dims(%x: tensor<1x2x4x3x4xf32>, %g: tensor<1x2x2x3x2xf32>) -> tensor<1x2x4x3x4xf32> {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%x, %g, %zero) <{window_dimensions = array<i64: 1, 1, 2, 1, 2>, window_strides = array<i64: 1, 1, 2, 1, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<1x2x4x3x4xf32>, tensor<1x2x2x3x2xf32>, tensor<f32>) -> tensor<1x2x4x3x4xf32>
  return %s : tensor<1x2x4x3x4xf32>
}
