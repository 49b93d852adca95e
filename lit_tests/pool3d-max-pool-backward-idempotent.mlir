// The pass is idempotent: its output contains no select_and_scatter it could
// match again, so a second run finds nothing and changes nothing.

// RUN: pool3d-opt %s --split-input-file --stats -o %t.once 2>&1 | FileCheck %s --check-prefix=FIRST
// RUN: pool3d-opt %s --split-input-file | pool3d-opt - --split-input-file --stats -o %t.twice 2>&1 | FileCheck %s --check-prefix=SECOND
// RUN: diff %t.once %t.twice
// RUN: FileCheck %s --input-file %t.twice

// FIRST: pool3d: 4 select_and_scatter found, 4 rewritten, 0 missed (recompute strategy: forward max-pool reused 1, inserted 3){{$}}
// SECOND: pool3d: 0 select_and_scatter found, 0 rewritten, 0 missed{{$}}

// Folded pad: the second run sees only the call.

// CHECK-LABEL: func.func @explicit_pad_symmetric(
// CHECK: stablehlo.custom_call @pool3d.max_pooling_3d_backward
// CHECK-NOT: stablehlo.select_and_scatter
func.func @explicit_pad_symmetric(%x: tensor<1x2x6x6x6xf32>, %g: tensor<1x2x3x3x3xf32>) -> tensor<1x2x6x6x6xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 1, 1, 1], high = [0, 0, 1, 1, 1], interior = [0, 0, 0, 0, 0] : (tensor<1x2x6x6x6xf32>, tensor<f32>) -> tensor<1x2x8x8x8xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%p, %g, %zero) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<1x2x8x8x8xf32>, tensor<1x2x3x3x3xf32>, tensor<f32>) -> tensor<1x2x8x8x8xf32>
  %r = stablehlo.slice %s [0:1, 0:2, 1:7, 1:7, 1:7] : (tensor<1x2x8x8x8xf32>) -> tensor<1x2x6x6x6xf32>
  return %r : tensor<1x2x6x6x6xf32>
}

// -----

// The rewrite leaves pad(-inf) -> call -> slice: no select_and_scatter to match again.

// CHECK-LABEL: func.func @explicit_pad_asymmetric_remainder(
// CHECK: stablehlo.custom_call @pool3d.max_pooling_3d_backward
// CHECK-NOT: stablehlo.select_and_scatter
func.func @explicit_pad_asymmetric_remainder(%x: tensor<1x2x6x6x6xf32>, %g: tensor<1x2x6x6x6xf32>) -> tensor<1x2x6x6x6xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 0, 0, 0], high = [0, 0, 1, 1, 1], interior = [0, 0, 0, 0, 0] : (tensor<1x2x6x6x6xf32>, tensor<f32>) -> tensor<1x2x7x7x7xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%p, %g, %zero) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 2, 2, 2>, window_strides = array<i64: 1, 1, 1, 1, 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<1x2x7x7x7xf32>, tensor<1x2x6x6x6xf32>, tensor<f32>) -> tensor<1x2x7x7x7xf32>
  %r = stablehlo.slice %s [0:1, 0:2, 0:6, 0:6, 0:6] : (tensor<1x2x7x7x7xf32>) -> tensor<1x2x6x6x6xf32>
  return %r : tensor<1x2x6x6x6xf32>
}

// -----

// Attribute form with a high-side remainder.

// CHECK-LABEL: func.func @attribute_asymmetric_remainder(
// CHECK: stablehlo.custom_call @pool3d.max_pooling_3d_backward
// CHECK-NOT: stablehlo.select_and_scatter
func.func @attribute_asymmetric_remainder(%x: tensor<1x2x6x6x6xf32>, %g: tensor<1x2x6x6x6xf32>) -> tensor<1x2x6x6x6xf32> {
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

// Reshapes around the call, forward reduce_window reused.

// CHECK-LABEL: func.func @forward_reused_rank4(
// CHECK: stablehlo.custom_call @pool3d.max_pooling_3d_backward
// CHECK-NOT: stablehlo.select_and_scatter
func.func @forward_reused_rank4(%x: tensor<3x4x4x4xf32>, %g: tensor<3x2x2x2xf32>) -> tensor<3x4x4x4xf32> {
  %init = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %y = "stablehlo.reduce_window"(%x, %init) <{padding = dense<[[0, 0], [0, 0], [0, 0], [0, 0]]> : tensor<4x2xi64>, window_dimensions = array<i64: 1, 2, 2, 2>, window_strides = array<i64: 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) : (tensor<3x4x4x4xf32>, tensor<f32>) -> tensor<3x2x2x2xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%x, %g, %zero) <{padding = dense<0> : tensor<4x2xi64>, window_dimensions = array<i64: 1, 2, 2, 2>, window_strides = array<i64: 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<3x4x4x4xf32>, tensor<3x2x2x2xf32>, tensor<f32>) -> tensor<3x4x4x4xf32>
  return %s : tensor<3x4x4x4xf32>
}
