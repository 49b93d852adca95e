// RUN: pool3d-opt %s --split-input-file | FileCheck %s
// RUN: pool3d-opt %s --split-input-file --strategy=indices | FileCheck %s --check-prefix=INDICES

// One forward max pool, two ways of writing its padding: on the reduce_window's
// attribute (JAX, TensorFlow) or as an explicit stablehlo.pad(x, -inf) in front
// of a reduce_window (torch-xla). The gradient's padding may be written either
// way too. The forward is the same whenever pad edges + attribute padding equal
// the gradient's effective padding; the pass must reuse it (recompute: the
// call's `output` operand; indices: the forward becomes the forward call) and
// insert no second reduce_window.

// torch-xla's training step: forward pad(-inf) + reduce_window without padding,
// gradient with the same (0, 1) padding on its attribute.

// CHECK-LABEL: func.func @explicit_pad_forward_attribute_gradient_f32
// CHECK-SAME: (%[[X:.*]]: tensor<1x2x7x7x7xf32>, %[[G:.*]]: tensor<1x2x4x4x4xf32>)
// CHECK: %[[Y:.*]] = "stablehlo.reduce_window"
// CHECK-NOT: stablehlo.reduce_window
// CHECK: %[[XP:.*]] = stablehlo.pad %[[X]], %{{.*}}, low = [0, 0, 0, 0, 0], high = [0, 0, 1, 1, 1]
// CHECK: %[[DX:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_backward(%[[G]], %[[XP]], %[[Y]])
// CHECK-SAME: padding = dense<0> : tensor<3xi64>
// CHECK-NOT: stablehlo.reduce_window
// CHECK-NOT: stablehlo.select_and_scatter
// CHECK: %[[R:.*]] = stablehlo.slice %[[DX]] [0:1, 0:2, 0:7, 0:7, 0:7]
// CHECK: return %[[Y]], %[[R]]

// INDICES-LABEL: func.func @explicit_pad_forward_attribute_gradient_f32
// INDICES-SAME: (%[[X:.*]]: tensor<1x2x7x7x7xf32>, %[[G:.*]]: tensor<1x2x4x4x4xf32>)
// INDICES-NOT: stablehlo.reduce_window
// INDICES: %[[FWD:.*]]:2 = stablehlo.custom_call @pool3d.max_pooling_3d_forward(
// INDICES: %[[DX:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_backward_from_indices(%[[G]], %[[FWD]]#1)
// INDICES-NOT: stablehlo.reduce_window
// INDICES-NOT: stablehlo.select_and_scatter
// INDICES: %[[R:.*]] = stablehlo.slice %[[DX]]
// INDICES: return %[[FWD]]#0, %[[R]]
func.func @explicit_pad_forward_attribute_gradient_f32(%x: tensor<1x2x7x7x7xf32>, %g: tensor<1x2x4x4x4xf32>) -> (tensor<1x2x4x4x4xf32>, tensor<1x2x7x7x7xf32>) {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 0, 0, 0], high = [0, 0, 1, 1, 1], interior = [0, 0, 0, 0, 0] : (tensor<1x2x7x7x7xf32>, tensor<f32>) -> tensor<1x2x8x8x8xf32>
  %y = "stablehlo.reduce_window"(%p, %ninf) <{window_dimensions = array<i64: 1, 1, 2, 2, 2>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) : (tensor<1x2x8x8x8xf32>, tensor<f32>) -> tensor<1x2x4x4x4xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%x, %g, %zero) <{padding = dense<[[0, 0], [0, 0], [0, 1], [0, 1], [0, 1]]> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 2, 2, 2>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<1x2x7x7x7xf32>, tensor<1x2x4x4x4xf32>, tensor<f32>) -> tensor<1x2x7x7x7xf32>
  return %y, %s : tensor<1x2x4x4x4xf32>, tensor<1x2x7x7x7xf32>
}

// -----

// Both forms at once on the forward: pad (1, 1) plus attribute padding (0, 1)
// is the gradient's (1, 2) (torch-xla, k3 s2 padding=1 ceil_mode=True). The
// kernel takes the symmetric 1; the remainder (0, 1) stays an explicit pad.

// CHECK-LABEL: func.func @pad_plus_attribute_forward_f32
// CHECK-SAME: (%[[X:.*]]: tensor<1x2x7x7x7xf32>, %[[G:.*]]: tensor<1x2x4x4x4xf32>)
// CHECK: %[[Y:.*]] = "stablehlo.reduce_window"
// CHECK-NOT: stablehlo.reduce_window
// CHECK: %[[DX:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_backward(%[[G]], %{{.*}}, %[[Y]])
// CHECK-SAME: padding = dense<1> : tensor<3xi64>
// CHECK-NOT: stablehlo.reduce_window
// CHECK-NOT: stablehlo.select_and_scatter
// CHECK: return %[[Y]], %{{.*}}

// INDICES-LABEL: func.func @pad_plus_attribute_forward_f32
// INDICES-SAME: (%[[X:.*]]: tensor<{{.*}}>, %[[G:.*]]: tensor<1x2x4x4x4xf32>)
// INDICES-NOT: stablehlo.reduce_window
// INDICES: %[[FWD:.*]]:2 = stablehlo.custom_call @pool3d.max_pooling_3d_forward(%[[X]])
// INDICES: %[[DX:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_backward_from_indices(%[[G]], %[[FWD]]#1)
// INDICES-NOT: stablehlo.reduce_window
// INDICES-NOT: stablehlo.select_and_scatter
// INDICES: return %[[FWD]]#0, %[[DX]]
func.func @pad_plus_attribute_forward_f32(%x: tensor<1x2x7x7x7xf32>, %g: tensor<1x2x4x4x4xf32>) -> (tensor<1x2x4x4x4xf32>, tensor<1x2x7x7x7xf32>) {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 1, 1, 1], high = [0, 0, 1, 1, 1], interior = [0, 0, 0, 0, 0] : (tensor<1x2x7x7x7xf32>, tensor<f32>) -> tensor<1x2x9x9x9xf32>
  %y = "stablehlo.reduce_window"(%p, %ninf) <{padding = dense<[[0, 0], [0, 0], [0, 1], [0, 1], [0, 1]]> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) : (tensor<1x2x9x9x9xf32>, tensor<f32>) -> tensor<1x2x4x4x4xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%x, %g, %zero) <{padding = dense<[[0, 0], [0, 0], [1, 2], [1, 2], [1, 2]]> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<1x2x7x7x7xf32>, tensor<1x2x4x4x4xf32>, tensor<f32>) -> tensor<1x2x7x7x7xf32>
  return %y, %s : tensor<1x2x4x4x4xf32>, tensor<1x2x7x7x7xf32>
}

// -----

// The reverse: JAX's CPU gradient (explicit pad, op padding 0, slice) with a
// forward whose padding is on its attribute (as jax.grad of a train step emits it).

// CHECK-LABEL: func.func @attribute_forward_explicit_pad_gradient_f32
// CHECK-SAME: (%[[X:.*]]: tensor<1x2x8x8x8xf32>, %[[G:.*]]: tensor<1x2x4x4x4xf32>)
// CHECK: %[[Y:.*]] = "stablehlo.reduce_window"(%[[X]], %{{.*}})
// CHECK-NOT: stablehlo.reduce_window
// CHECK: %[[DX:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_backward(%[[G]], %[[X]], %[[Y]])
// CHECK-SAME: padding = dense<1> : tensor<3xi64>
// CHECK-NOT: stablehlo.select_and_scatter
// CHECK: return %[[Y]], %[[DX]]
// INDICES-LABEL: func.func @attribute_forward_explicit_pad_gradient_f32
// INDICES-SAME: (%[[X:.*]]: tensor<{{.*}}>, %[[G:.*]]: tensor<1x2x4x4x4xf32>)
// INDICES-NOT: stablehlo.reduce_window
// INDICES: %[[FWD:.*]]:2 = stablehlo.custom_call @pool3d.max_pooling_3d_forward(%[[X]])
// INDICES: %[[DX:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_backward_from_indices(%[[G]], %[[FWD]]#1)
// INDICES-NOT: stablehlo.reduce_window
// INDICES-NOT: stablehlo.select_and_scatter
// INDICES: return %[[FWD]]#0, %[[DX]]
func.func @attribute_forward_explicit_pad_gradient_f32(%x: tensor<1x2x8x8x8xf32>, %g: tensor<1x2x4x4x4xf32>) -> (tensor<1x2x4x4x4xf32>, tensor<1x2x8x8x8xf32>) {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %y = "stablehlo.reduce_window"(%x, %ninf) <{padding = dense<[[0, 0], [0, 0], [1, 1], [1, 1], [1, 1]]> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) : (tensor<1x2x8x8x8xf32>, tensor<f32>) -> tensor<1x2x4x4x4xf32>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 1, 1, 1], high = [0, 0, 1, 1, 1], interior = [0, 0, 0, 0, 0] : (tensor<1x2x8x8x8xf32>, tensor<f32>) -> tensor<1x2x10x10x10xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%p, %g, %zero) <{window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<1x2x10x10x10xf32>, tensor<1x2x4x4x4xf32>, tensor<f32>) -> tensor<1x2x10x10x10xf32>
  %r = stablehlo.slice %s [0:1, 0:2, 1:9, 1:9, 1:9] : (tensor<1x2x10x10x10xf32>) -> tensor<1x2x8x8x8xf32>
  return %y, %r : tensor<1x2x4x4x4xf32>, tensor<1x2x8x8x8xf32>
}

// -----

// Explicit on both sides, through two different pad ops of x.

// CHECK-LABEL: func.func @explicit_pad_forward_explicit_pad_gradient_f32
// CHECK-SAME: (%[[X:.*]]: tensor<1x2x8x8x8xf32>, %[[G:.*]]: tensor<1x2x4x4x4xf32>)
// CHECK: %[[Y:.*]] = "stablehlo.reduce_window"
// CHECK-NOT: stablehlo.reduce_window
// CHECK: %[[DX:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_backward(%[[G]], %[[X]], %[[Y]])
// CHECK-NOT: stablehlo.select_and_scatter
// CHECK: return %[[Y]], %[[DX]]
// INDICES-LABEL: func.func @explicit_pad_forward_explicit_pad_gradient_f32
// INDICES-SAME: (%[[X:.*]]: tensor<{{.*}}>, %[[G:.*]]: tensor<1x2x4x4x4xf32>)
// INDICES-NOT: stablehlo.reduce_window
// INDICES: %[[FWD:.*]]:2 = stablehlo.custom_call @pool3d.max_pooling_3d_forward(%[[X]])
// INDICES: %[[DX:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_backward_from_indices(%[[G]], %[[FWD]]#1)
// INDICES-NOT: stablehlo.reduce_window
// INDICES-NOT: stablehlo.select_and_scatter
// INDICES: return %[[FWD]]#0, %[[DX]]
func.func @explicit_pad_forward_explicit_pad_gradient_f32(%x: tensor<1x2x8x8x8xf32>, %g: tensor<1x2x4x4x4xf32>) -> (tensor<1x2x4x4x4xf32>, tensor<1x2x8x8x8xf32>) {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %fp = stablehlo.pad %x, %ninf, low = [0, 0, 1, 1, 1], high = [0, 0, 1, 1, 1], interior = [0, 0, 0, 0, 0] : (tensor<1x2x8x8x8xf32>, tensor<f32>) -> tensor<1x2x10x10x10xf32>
  %y = "stablehlo.reduce_window"(%fp, %ninf) <{window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) : (tensor<1x2x10x10x10xf32>, tensor<f32>) -> tensor<1x2x4x4x4xf32>
  %ninf2 = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %p = stablehlo.pad %x, %ninf2, low = [0, 0, 1, 1, 1], high = [0, 0, 1, 1, 1], interior = [0, 0, 0, 0, 0] : (tensor<1x2x8x8x8xf32>, tensor<f32>) -> tensor<1x2x10x10x10xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%p, %g, %zero) <{window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<1x2x10x10x10xf32>, tensor<1x2x4x4x4xf32>, tensor<f32>) -> tensor<1x2x10x10x10xf32>
  %r = stablehlo.slice %s [0:1, 0:2, 1:9, 1:9, 1:9] : (tensor<1x2x10x10x10xf32>) -> tensor<1x2x8x8x8xf32>
  return %y, %r : tensor<1x2x4x4x4xf32>, tensor<1x2x8x8x8xf32>
}

// -----

// Negative: a forward padded with 0 is not the max pool (a window of negative
// values would have the maximum 0). Not reused: the pass inserts its own
// forward reduce_window and the call reads that one.

// CHECK-LABEL: func.func @zero_padded_forward_not_reused_f32
// CHECK: %[[Y0:.*]] = "stablehlo.reduce_window"
// CHECK: %[[Y:.*]] = "stablehlo.reduce_window"
// CHECK: stablehlo.custom_call @pool3d.max_pooling_3d_backward(%{{.*}}, %{{.*}}, %[[Y]])
// CHECK: return %[[Y0]], %{{.*}}
// INDICES-LABEL: func.func @zero_padded_forward_not_reused_f32
// INDICES: %[[Y0:.*]] = "stablehlo.reduce_window"
// INDICES-NOT: stablehlo.custom_call @pool3d.max_pooling_3d_forward
// INDICES: stablehlo.custom_call @pool3d.max_pooling_3d_backward_from_input(
// INDICES: return %[[Y0]], %{{.*}}
func.func @zero_padded_forward_not_reused_f32(%x: tensor<1x2x7x7x7xf32>, %g: tensor<1x2x4x4x4xf32>) -> (tensor<1x2x4x4x4xf32>, tensor<1x2x7x7x7xf32>) {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %pzero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %p = stablehlo.pad %x, %pzero, low = [0, 0, 0, 0, 0], high = [0, 0, 1, 1, 1], interior = [0, 0, 0, 0, 0] : (tensor<1x2x7x7x7xf32>, tensor<f32>) -> tensor<1x2x8x8x8xf32>
  %y = "stablehlo.reduce_window"(%p, %ninf) <{window_dimensions = array<i64: 1, 1, 2, 2, 2>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) : (tensor<1x2x8x8x8xf32>, tensor<f32>) -> tensor<1x2x4x4x4xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%x, %g, %zero) <{padding = dense<[[0, 0], [0, 0], [0, 1], [0, 1], [0, 1]]> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 2, 2, 2>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<1x2x7x7x7xf32>, tensor<1x2x4x4x4xf32>, tensor<f32>) -> tensor<1x2x7x7x7xf32>
  return %y, %s : tensor<1x2x4x4x4xf32>, tensor<1x2x7x7x7xf32>
}

// -----

// Negative: pad edges + attribute padding (0, 2) differ from the gradient's
// (0, 1), although the output shapes agree: another forward, not reused.

// CHECK-LABEL: func.func @forward_padding_differs_not_reused_f32
// CHECK: %[[Y0:.*]] = "stablehlo.reduce_window"
// CHECK: %[[Y:.*]] = "stablehlo.reduce_window"
// CHECK: stablehlo.custom_call @pool3d.max_pooling_3d_backward(%{{.*}}, %{{.*}}, %[[Y]])
// CHECK: return %[[Y0]], %{{.*}}
// INDICES-LABEL: func.func @forward_padding_differs_not_reused_f32
// INDICES: %[[Y0:.*]] = "stablehlo.reduce_window"
// INDICES-NOT: stablehlo.custom_call @pool3d.max_pooling_3d_forward
// INDICES: stablehlo.custom_call @pool3d.max_pooling_3d_backward_from_input(
// INDICES: return %[[Y0]], %{{.*}}
func.func @forward_padding_differs_not_reused_f32(%x: tensor<1x2x7x7x7xf32>, %g: tensor<1x2x4x4x4xf32>) -> (tensor<1x2x4x4x4xf32>, tensor<1x2x7x7x7xf32>) {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 0, 0, 0], high = [0, 0, 1, 1, 1], interior = [0, 0, 0, 0, 0] : (tensor<1x2x7x7x7xf32>, tensor<f32>) -> tensor<1x2x8x8x8xf32>
  %y = "stablehlo.reduce_window"(%p, %ninf) <{padding = dense<[[0, 0], [0, 0], [0, 1], [0, 1], [0, 1]]> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 2, 2, 2>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) : (tensor<1x2x8x8x8xf32>, tensor<f32>) -> tensor<1x2x4x4x4xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%x, %g, %zero) <{padding = dense<[[0, 0], [0, 0], [0, 1], [0, 1], [0, 1]]> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 2, 2, 2>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<1x2x7x7x7xf32>, tensor<1x2x4x4x4xf32>, tensor<f32>) -> tensor<1x2x7x7x7xf32>
  return %y, %s : tensor<1x2x4x4x4xf32>, tensor<1x2x7x7x7xf32>
}
