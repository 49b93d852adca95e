// RUN: pool3d-opt %s --split-input-file --strategy=indices | FileCheck %s
// RUN: pool3d-opt %s --split-input-file --strategy=indices --remarks 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK
// RUN: pool3d-opt %s --split-input-file --strategy=recompute | FileCheck %s --check-prefix=RECOMPUTE

// The indices strategy: the forward max pool becomes the forward call, which
// also returns each window's selection; the gradient scatters through it.
// A gradient with no forward before it in its block gets one fused call.
// With --strategy=recompute the same file gets today's backward call and no
// layer call anywhere in the output (the NOTs before and after the one
// positive match cover all of it).
// RECOMPUTE-NOT: @pool3d.max_pooling_3d_forward
// RECOMPUTE-NOT: @pool3d.max_pooling_3d_backward_from
// RECOMPUTE: @pool3d.max_pooling_3d_backward(
// RECOMPUTE-NOT: @pool3d.max_pooling_3d_forward
// RECOMPUTE-NOT: @pool3d.max_pooling_3d_backward_from


// -----

// A training step: the forward max pool is in the function. It becomes the
// forward call; its uses (here: returned) take the call's output, and the
// gradient scatters through the call's indices. No reduce_window is left.

// CHECK-LABEL: func.func @training_step_forward_becomes_the_forward_call
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x8x8x8xf32>, %[[G:.*]]: tensor<2x3x4x4x4xf32>)
// CHECK-NOT: stablehlo.reduce_window
// CHECK: %[[F:.*]]:2 = stablehlo.custom_call @pool3d.max_pooling_3d_forward(%[[X]])
// CHECK-SAME: backend_config = {data_format = "NCDHW", kernel_size = dense<3> : tensor<3xi64>, output_format = "NCDHW", padding = dense<1> : tensor<3xi64>, stride = dense<2> : tensor<3xi64>}
// CHECK-SAME: sdy.sharding_rule = #sdy.op_sharding_rule<([i, j, n, o, p])->([i, j, k, l, m], [i, j, k, l, m])
// CHECK-SAME: (tensor<2x3x8x8x8xf32>) -> (tensor<2x3x4x4x4xf32>, tensor<2x3x4x4x4xi16>)
// CHECK: %[[DX:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_backward_from_indices(%[[G]], %[[F]]#1)
// CHECK-SAME: sdy.sharding_rule = #sdy.op_sharding_rule<([i, j, k, l, m], [i, j, k, l, m])->([i, j, n, o, p])
// CHECK-SAME: (tensor<2x3x4x4x4xf32>, tensor<2x3x4x4x4xi16>) -> tensor<2x3x8x8x8xf32>
// CHECK-NOT: stablehlo.select_and_scatter
// CHECK-NOT: stablehlo.reduce_window
// CHECK: return %[[F]]#0, %[[DX]]
// REMARK: pool3d-max-pool-backward-indices.mlir:[[# @LINE + 10]]:8: remark: max-pool gradient rewritten: NCDHW kernel_size=[3, 3, 3] stride=[2, 2, 2] padding=[1, 1, 1], f32, indices strategy: forward max-pool replaced by the forward call, gradient from its indices
func.func @training_step_forward_becomes_the_forward_call(%x: tensor<2x3x8x8x8xf32>, %g: tensor<2x3x4x4x4xf32>) -> (tensor<2x3x4x4x4xf32>, tensor<2x3x8x8x8xf32>) {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %y = "stablehlo.reduce_window"(%x, %ninf) <{padding = dense<[[0, 0], [0, 0], [1, 1], [1, 1], [1, 1]]> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) : (tensor<2x3x8x8x8xf32>, tensor<f32>) -> tensor<2x3x4x4x4xf32>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 1, 1, 1], high = [0, 0, 1, 1, 1], interior = [0, 0, 0, 0, 0] : (tensor<2x3x8x8x8xf32>, tensor<f32>) -> tensor<2x3x10x10x10xf32>
  %s = "stablehlo.select_and_scatter"(%p, %g, %zero) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<2x3x10x10x10xf32>, tensor<2x3x4x4x4xf32>, tensor<f32>) -> tensor<2x3x10x10x10xf32>
  %r = stablehlo.slice %s [0:2, 0:3, 1:9, 1:9, 1:9] : (tensor<2x3x10x10x10xf32>) -> tensor<2x3x8x8x8xf32>
  return %y, %r : tensor<2x3x4x4x4xf32>, tensor<2x3x8x8x8xf32>
}

// -----

// A bare gradient (jax.grad through a pool, vjp with an unused primal): no
// forward exists, so no reduce_window is inserted: one fused call.

// CHECK-LABEL: func.func @bare_gradient_becomes_one_fused_call
// REMARK: pool3d-max-pool-backward-indices.mlir:[[# @LINE + 14]]:{{[0-9]+}}: remark: max-pool gradient rewritten: {{.*}}, indices strategy: no forward max-pool before it in its block, one fused call from the input
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x8x8x8xf32>, %[[G:.*]]: tensor<2x3x4x4x4xf32>)
// CHECK-NOT: stablehlo.reduce_window
// CHECK-NOT: stablehlo.pad
// CHECK: %[[DX:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_backward_from_input(%[[G]], %[[X]])
// CHECK-SAME: sdy.sharding_rule = #sdy.op_sharding_rule<([i, j, k, l, m], [i, j, n, o, p])->([i, j, n, o, p])
// CHECK-SAME: (tensor<2x3x4x4x4xf32>, tensor<2x3x8x8x8xf32>) -> tensor<2x3x8x8x8xf32>
// CHECK-NOT: stablehlo.reduce_window
// CHECK-NOT: stablehlo.slice
// CHECK: return %[[DX]]
func.func @bare_gradient_becomes_one_fused_call(%x: tensor<2x3x8x8x8xf32>, %g: tensor<2x3x4x4x4xf32>) -> tensor<2x3x8x8x8xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 1, 1, 1], high = [0, 0, 1, 1, 1], interior = [0, 0, 0, 0, 0] : (tensor<2x3x8x8x8xf32>, tensor<f32>) -> tensor<2x3x10x10x10xf32>
  %s = "stablehlo.select_and_scatter"(%p, %g, %zero) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<2x3x10x10x10xf32>, tensor<2x3x4x4x4xf32>, tensor<f32>) -> tensor<2x3x10x10x10xf32>
  %r = stablehlo.slice %s [0:2, 0:3, 1:9, 1:9, 1:9] : (tensor<2x3x10x10x10xf32>) -> tensor<2x3x8x8x8xf32>
  return %r : tensor<2x3x8x8x8xf32>
}

// -----

// One forward, two gradients of it (attribute padding, as TPU/TF/torch-xla
// write it): one forward call, both gradients read its indices.

// CHECK-LABEL: func.func @one_forward_shared_by_two_gradients
// REMARK: pool3d-max-pool-backward-indices.mlir:[[# @LINE + 18]]:{{[0-9]+}}: remark: max-pool gradient rewritten: {{.*}}, indices strategy: forward max-pool replaced by the forward call, gradient from its indices
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x8x8x8xf32>, %[[G:.*]]: tensor<2x3x4x4x4xf32>)
// CHECK: %[[F:.*]]:2 = stablehlo.custom_call @pool3d.max_pooling_3d_forward(%[[X]])
// CHECK-NOT: @pool3d.max_pooling_3d_forward
// CHECK: %[[G2:.*]] = stablehlo.multiply %[[G]], %[[F]]#0
// CHECK: %[[DX1:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_backward_from_indices(%[[G]], %[[F]]#1)
// CHECK: %[[DX2:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_backward_from_indices(%[[G2]], %[[F]]#1)
// CHECK-NOT: stablehlo.reduce_window
// CHECK: return %[[DX1]], %[[DX2]]
func.func @one_forward_shared_by_two_gradients(%x: tensor<2x3x8x8x8xf32>, %g: tensor<2x3x4x4x4xf32>) -> (tensor<2x3x8x8x8xf32>, tensor<2x3x8x8x8xf32>) {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %y = "stablehlo.reduce_window"(%x, %ninf) <{padding = dense<[[0, 0], [0, 0], [1, 1], [1, 1], [1, 1]]> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) : (tensor<2x3x8x8x8xf32>, tensor<f32>) -> tensor<2x3x4x4x4xf32>
  %g2 = stablehlo.multiply %g, %y : tensor<2x3x4x4x4xf32>
  %s = "stablehlo.select_and_scatter"(%x, %g, %zero) <{padding = dense<[[0, 0], [0, 0], [1, 1], [1, 1], [1, 1]]> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<2x3x8x8x8xf32>, tensor<2x3x4x4x4xf32>, tensor<f32>) -> tensor<2x3x8x8x8xf32>
  %s2 = "stablehlo.select_and_scatter"(%x, %g2, %zero) <{padding = dense<[[0, 0], [0, 0], [1, 1], [1, 1], [1, 1]]> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<2x3x8x8x8xf32>, tensor<2x3x4x4x4xf32>, tensor<f32>) -> tensor<2x3x8x8x8xf32>
  return %s, %s2 : tensor<2x3x8x8x8xf32>, tensor<2x3x8x8x8xf32>
}

// -----

// The forward is in the function, the gradient inside a `case` branch: the
// forward does not come before the gradient in its block, so the indices are
// not threaded into the region: the forward stays, the gradient gets the
// fused call.

// CHECK-LABEL: func.func @forward_in_another_block_gives_the_fused_call
// REMARK: pool3d-max-pool-backward-indices.mlir:[[# @LINE + 16]]:{{[0-9]+}}: remark: max-pool gradient rewritten: {{.*}}, indices strategy: no forward max-pool before it in its block, one fused call from the input
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x8x8x8xf32>, %[[G:.*]]: tensor<2x3x4x4x4xf32>
// CHECK: %[[Y:.*]] = "stablehlo.reduce_window"(%[[X]]
// CHECK: "stablehlo.case"
// CHECK: stablehlo.custom_call @pool3d.max_pooling_3d_backward_from_input(%[[G]], %[[X]])
// CHECK-NOT: @pool3d.max_pooling_3d_forward
// CHECK: return %[[Y]]
func.func @forward_in_another_block_gives_the_fused_call(%x: tensor<2x3x8x8x8xf32>, %g: tensor<2x3x4x4x4xf32>, %i: tensor<i32>) -> (tensor<2x3x4x4x4xf32>, tensor<2x3x8x8x8xf32>) {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %y = "stablehlo.reduce_window"(%x, %ninf) <{padding = dense<[[0, 0], [0, 0], [1, 1], [1, 1], [1, 1]]> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) : (tensor<2x3x8x8x8xf32>, tensor<f32>) -> tensor<2x3x4x4x4xf32>
  %r = "stablehlo.case"(%i) ({
    %s = "stablehlo.select_and_scatter"(%x, %g, %zero) <{padding = dense<[[0, 0], [0, 0], [1, 1], [1, 1], [1, 1]]> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<2x3x8x8x8xf32>, tensor<2x3x4x4x4xf32>, tensor<f32>) -> tensor<2x3x8x8x8xf32>
    stablehlo.return %s : tensor<2x3x8x8x8xf32>
  }, {
    stablehlo.return %x : tensor<2x3x8x8x8xf32>
  }) : (tensor<i32>) -> tensor<2x3x8x8x8xf32>
  return %y, %r : tensor<2x3x4x4x4xf32>, tensor<2x3x8x8x8xf32>
}

// -----

// A forward after the gradient does not dominate it: fused call, forward kept.

// CHECK-LABEL: func.func @forward_after_the_gradient_gives_the_fused_call
// REMARK: pool3d-max-pool-backward-indices.mlir:[[# @LINE + 9]]:{{[0-9]+}}: remark: max-pool gradient rewritten: {{.*}}, indices strategy: no forward max-pool before it in its block, one fused call from the input
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x8x8x8xf32>, %[[G:.*]]: tensor<2x3x4x4x4xf32>)
// CHECK: %[[DX:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_backward_from_input(%[[G]], %[[X]])
// CHECK: %[[Y:.*]] = "stablehlo.reduce_window"(%[[X]]
// CHECK-NOT: @pool3d.max_pooling_3d_forward
// CHECK: return %[[Y]], %[[DX]]
func.func @forward_after_the_gradient_gives_the_fused_call(%x: tensor<2x3x8x8x8xf32>, %g: tensor<2x3x4x4x4xf32>) -> (tensor<2x3x4x4x4xf32>, tensor<2x3x8x8x8xf32>) {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%x, %g, %zero) <{padding = dense<[[0, 0], [0, 0], [1, 1], [1, 1], [1, 1]]> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<2x3x8x8x8xf32>, tensor<2x3x4x4x4xf32>, tensor<f32>) -> tensor<2x3x8x8x8xf32>
  %y = "stablehlo.reduce_window"(%x, %ninf) <{padding = dense<[[0, 0], [0, 0], [1, 1], [1, 1], [1, 1]]> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) : (tensor<2x3x8x8x8xf32>, tensor<f32>) -> tensor<2x3x4x4x4xf32>
  return %y, %s : tensor<2x3x4x4x4xf32>, tensor<2x3x8x8x8xf32>
}

// -----

// JAX SAME with an even window on an odd size: padding (0, 1). The kernel
// pads symmetrically (0); the remainder is an explicit -inf pad that the
// forward call reads, and the gradient is sliced back.

// CHECK-LABEL: func.func @same_even_window_forward_on_the_remainder_pad
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x5x5x5xf32>, %[[G:.*]]: tensor<2x3x3x3x3xf32>)
// CHECK: %[[NINF:.*]] = stablehlo.constant dense<0xFF800000>
// CHECK: %[[P:.*]] = stablehlo.pad %[[X]], %[[NINF]], low = [0, 0, 0, 0, 0], high = [0, 0, 1, 1, 1]
// CHECK: %[[F:.*]]:2 = stablehlo.custom_call @pool3d.max_pooling_3d_forward(%[[P]])
// CHECK-SAME: padding = dense<0> : tensor<3xi64>
// CHECK-SAME: (tensor<2x3x6x6x6xf32>) -> (tensor<2x3x3x3x3xf32>, tensor<2x3x3x3x3xi16>)
// CHECK: %[[DP:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_backward_from_indices(%[[G]], %[[F]]#1)
// CHECK-SAME: -> tensor<2x3x6x6x6xf32>
// CHECK: %[[DX:.*]] = stablehlo.slice %[[DP]] [0:2, 0:3, 0:5, 0:5, 0:5]
// CHECK-NOT: stablehlo.reduce_window
// CHECK: return %[[F]]#0, %[[DX]]
func.func @same_even_window_forward_on_the_remainder_pad(%x: tensor<2x3x5x5x5xf32>, %g: tensor<2x3x3x3x3xf32>) -> (tensor<2x3x3x3x3xf32>, tensor<2x3x5x5x5xf32>) {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %y = "stablehlo.reduce_window"(%x, %ninf) <{padding = dense<[[0, 0], [0, 0], [0, 1], [0, 1], [0, 1]]> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 2, 2, 2>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) : (tensor<2x3x5x5x5xf32>, tensor<f32>) -> tensor<2x3x3x3x3xf32>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 0, 0, 0], high = [0, 0, 1, 1, 1], interior = [0, 0, 0, 0, 0] : (tensor<2x3x5x5x5xf32>, tensor<f32>) -> tensor<2x3x6x6x6xf32>
  %s = "stablehlo.select_and_scatter"(%p, %g, %zero) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 2, 2, 2>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<2x3x6x6x6xf32>, tensor<2x3x3x3x3xf32>, tensor<f32>) -> tensor<2x3x6x6x6xf32>
  %r = stablehlo.slice %s [0:2, 0:3, 0:5, 0:5, 0:5] : (tensor<2x3x6x6x6xf32>) -> tensor<2x3x5x5x5xf32>
  return %y, %r : tensor<2x3x3x3x3xf32>, tensor<2x3x5x5x5xf32>
}

// -----

// Negative: GT (last maximum wins) is not the contract's selection; neither
// the gradient nor its forward changes under the indices strategy.

// CHECK-LABEL: func.func @last_maximum_select_is_not_rewritten
// CHECK: "stablehlo.reduce_window"
// CHECK: "stablehlo.select_and_scatter"
// CHECK: stablehlo.compare GT
// CHECK-NOT: stablehlo.custom_call
// REMARK: pool3d-max-pool-backward-indices.mlir:[[# @LINE + 9]]:8: remark: max-pool gradient not rewritten: select is compare GT (last maximum wins), not GE (first maximum wins)
func.func @last_maximum_select_is_not_rewritten(%x: tensor<2x3x8x8x8xf32>, %g: tensor<2x3x4x4x4xf32>) -> (tensor<2x3x4x4x4xf32>, tensor<2x3x8x8x8xf32>) {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %y = "stablehlo.reduce_window"(%x, %ninf) <{padding = dense<[[0, 0], [0, 0], [1, 1], [1, 1], [1, 1]]> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) : (tensor<2x3x8x8x8xf32>, tensor<f32>) -> tensor<2x3x4x4x4xf32>
  %s = "stablehlo.select_and_scatter"(%x, %g, %zero) <{padding = dense<[[0, 0], [0, 0], [1, 1], [1, 1], [1, 1]]> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<2x3x8x8x8xf32>, tensor<2x3x4x4x4xf32>, tensor<f32>) -> tensor<2x3x8x8x8xf32>
  return %y, %s : tensor<2x3x4x4x4xf32>, tensor<2x3x8x8x8xf32>
}

// -----

// The cotangent is the forward's own result (`vjp(y)`): after the forward
// becomes the forward call, the gradient reads the call's output too, and no
// reduce_window is left.

// CHECK-LABEL: func.func @cotangent_is_the_forward_output
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x8x8x8xf32>)
// CHECK: %[[F:.*]]:2 = stablehlo.custom_call @pool3d.max_pooling_3d_forward(%[[X]])
// CHECK: %[[DX:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_backward_from_indices(%[[F]]#0, %[[F]]#1)
// CHECK-NOT: stablehlo.reduce_window
// CHECK: return %[[DX]]
func.func @cotangent_is_the_forward_output(%x: tensor<2x3x8x8x8xf32>) -> tensor<2x3x8x8x8xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %y = "stablehlo.reduce_window"(%x, %ninf) <{padding = dense<[[0, 0], [0, 0], [1, 1], [1, 1], [1, 1]]> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) : (tensor<2x3x8x8x8xf32>, tensor<f32>) -> tensor<2x3x4x4x4xf32>
  %s = "stablehlo.select_and_scatter"(%x, %y, %zero) <{padding = dense<[[0, 0], [0, 0], [1, 1], [1, 1], [1, 1]]> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<2x3x8x8x8xf32>, tensor<2x3x4x4x4xf32>, tensor<f32>) -> tensor<2x3x8x8x8xf32>
  return %s : tensor<2x3x8x8x8xf32>
}
