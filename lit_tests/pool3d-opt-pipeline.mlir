// RUN: pool3d-opt %s --split-input-file --pass-pipeline=canonicalize,pool3d-max-pool-backward,cse | FileCheck %s
// RUN: pool3d-opt %s --split-input-file | FileCheck %s --check-prefix=ALONE
// RUN: pool3d-opt %s --split-input-file --pass-pipeline=canonicalize,cse | FileCheck %s --check-prefix=UPSTREAM

// The pass runs in one PassManager between upstream passes: canonicalize
// before it erases the dead multiply (the pass alone never erases it), the
// pass rewrites both gradients, each with its own inserted -inf constant, and
// cse after it merges those two constants into one. Prefix ALONE checks the
// default pipeline (the pass only); prefix UPSTREAM a pipeline without the
// pass, which leaves the gradients alone.

// CHECK-LABEL: func.func @canonicalize_pass_cse
// CHECK-SAME: (%[[X:.*]]: tensor<1x2x4x4x4xf32>, %[[G1:.*]]: tensor<1x2x2x2x2xf32>, %[[G2:.*]]: tensor<1x2x3x3x3xf32>)
// CHECK-NOT: stablehlo.multiply
// CHECK: %[[NINF:.*]] = stablehlo.constant dense<0xFF800000> : tensor<f32>
// CHECK-NOT: stablehlo.constant
// CHECK: %[[Y1:.*]] = "stablehlo.reduce_window"(%[[X]], %[[NINF]])
// CHECK: %[[DX1:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_backward(%[[G1]], %[[X]], %[[Y1]])
// CHECK-NOT: stablehlo.constant
// CHECK: %[[Y2:.*]] = "stablehlo.reduce_window"(%[[X]], %[[NINF]])
// CHECK: %[[DX2:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_backward(%[[G2]], %[[X]], %[[Y2]])
// CHECK-NOT: stablehlo.select_and_scatter
// CHECK: return %[[DX1]], %[[DX2]]

// ALONE-LABEL: func.func @canonicalize_pass_cse
// ALONE: stablehlo.multiply
// ALONE: stablehlo.constant dense<0xFF800000>
// ALONE: stablehlo.custom_call @pool3d.max_pooling_3d_backward
// ALONE: stablehlo.constant dense<0xFF800000>
// ALONE: stablehlo.custom_call @pool3d.max_pooling_3d_backward
// UPSTREAM-LABEL: func.func @canonicalize_pass_cse
// UPSTREAM-NOT: stablehlo.multiply
// UPSTREAM: "stablehlo.select_and_scatter"
// UPSTREAM: "stablehlo.select_and_scatter"
// UPSTREAM-NOT: stablehlo.custom_call
func.func @canonicalize_pass_cse(%x: tensor<1x2x4x4x4xf32>, %g1: tensor<1x2x2x2x2xf32>, %g2: tensor<1x2x3x3x3xf32>) -> (tensor<1x2x4x4x4xf32>, tensor<1x2x4x4x4xf32>) {
  %dead = stablehlo.multiply %x, %x : tensor<1x2x4x4x4xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s1 = "stablehlo.select_and_scatter"(%x, %g1, %zero) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 2, 2, 2>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<1x2x4x4x4xf32>, tensor<1x2x2x2x2xf32>, tensor<f32>) -> tensor<1x2x4x4x4xf32>
  %s2 = "stablehlo.select_and_scatter"(%x, %g2, %zero) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 2, 2, 2>, window_strides = array<i64: 1, 1, 1, 1, 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<1x2x4x4x4xf32>, tensor<1x2x3x3x3xf32>, tensor<f32>) -> tensor<1x2x4x4x4xf32>
  return %s1, %s2 : tensor<1x2x4x4x4xf32>, tensor<1x2x4x4x4xf32>
}

