// Input from stdin (`-`, and by default), output to stdout or to -o FILE.
// -o replaces an existing file; through a symlink it writes the link's target
// and keeps the link.

// RUN: pool3d-opt - < %s | FileCheck %s
// RUN: pool3d-opt < %s | FileCheck %s

// RUN: echo old > %t.out
// RUN: pool3d-opt %s -o %t.out
// RUN: FileCheck %s --input-file %t.out

// RUN: rm -f %t.link %t.target
// RUN: echo old > %t.target
// RUN: ln -sf %t.target %t.link
// RUN: pool3d-opt %s -o %t.link
// RUN: test -L %t.link
// RUN: FileCheck %s --input-file %t.target

// CHECK-LABEL: func.func @from_stdin
// CHECK-NOT: old
// CHECK: stablehlo.custom_call @pool3d.max_pooling_3d_backward
// CHECK-NOT: stablehlo.select_and_scatter
func.func @from_stdin(%x: tensor<1x2x4x4x4xf32>, %g: tensor<1x2x2x2x2xf32>) -> tensor<1x2x4x4x4xf32> {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%x, %g, %zero) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 2, 2, 2>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<1x2x4x4x4xf32>, tensor<1x2x2x2x2xf32>, tensor<f32>) -> tensor<1x2x4x4x4xf32>
  return %s : tensor<1x2x4x4x4xf32>
}
