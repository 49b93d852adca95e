// --print-debuginfo names the input file in the locations, as mlir-opt does
// (stdin: "<stdin>"), for a module, a bare function and several top-level
// operations alike. Printed that way and bound later, the remark still points
// at the gradient in this file, not at whatever sits on that line of the
// intermediate file.

// RUN: pool3d-opt %s --split-input-file --print-debuginfo | FileCheck %s
// RUN: pool3d-opt - --print-debuginfo < %s | FileCheck %s --check-prefix=STDIN
// RUN: pool3d-opt %s --split-input-file --print-debuginfo -o %t.mlir
// RUN: pool3d-opt %t.mlir --split-input-file --target=cpu --remarks 2>&1 >/dev/null | FileCheck %s --check-prefix=BOUND
// RUN: not grep -F 'loc("-"' %t.mlir
// RUN: pool3d-opt - --print-debuginfo < %s | not grep -F 'loc("-"'

// CHECK: #[[BARE:loc[0-9]+]] = loc("{{.*}}debuginfo.mlir":[[# @LINE + 9]]:8)
// CHECK: func.func @bare_function
// CHECK: stablehlo.custom_call @pool3d.max_pooling_3d_backward({{.*}} loc(#[[BARE]])
// STDIN: #[[STDIN:loc[0-9]+]] = loc("<stdin>":[[# @LINE + 6]]:8)
// STDIN: func.func @bare_function
// STDIN: stablehlo.custom_call @pool3d.max_pooling_3d_backward({{.*}} loc(#[[STDIN]])
// BOUND: debuginfo.mlir:[[# @LINE + 3]]:8: remark: neutral call rewritten: bound to the cpu binding
func.func @bare_function(%x: tensor<1x2x4x4x4xf32>, %g: tensor<1x2x2x2x2xf32>) -> tensor<1x2x4x4x4xf32> {
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

// -----

// CHECK: #[[IN_MODULE:loc[0-9]+]] = loc("{{.*}}debuginfo.mlir":[[# @LINE + 7]]:10)
// CHECK: module @named_module
// CHECK: stablehlo.custom_call @pool3d.max_pooling_3d_backward({{.*}} loc(#[[IN_MODULE]])
// BOUND: debuginfo.mlir:[[# @LINE + 4]]:10: remark: neutral call rewritten: bound to the cpu binding
module @named_module {
  func.func @main(%x: tensor<1x2x4x4x4xf32>, %g: tensor<1x2x2x2x2xf32>) -> tensor<1x2x4x4x4xf32> {
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
}

// -----

// CHECK: #[[SECOND:loc[0-9]+]] = loc("{{.*}}debuginfo.mlir":[[# @LINE + 11]]:8)
// CHECK: func.func private @helper
// CHECK: func.func @two_functions
// CHECK: stablehlo.custom_call @pool3d.max_pooling_3d_backward({{.*}} loc(#[[SECOND]])
// BOUND: debuginfo.mlir:[[# @LINE + 7]]:8: remark: neutral call rewritten: bound to the cpu binding
func.func private @helper(%x: tensor<1x2x4x4x4xf32>) -> tensor<1x2x4x4x4xf32> {
  return %x : tensor<1x2x4x4x4xf32>
}
func.func @two_functions(%x: tensor<1x2x4x4x4xf32>, %g: tensor<1x2x2x2x2xf32>) -> tensor<1x2x4x4x4xf32> {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %y = func.call @helper(%x) : (tensor<1x2x4x4x4xf32>) -> tensor<1x2x4x4x4xf32>
  %s = "stablehlo.select_and_scatter"(%y, %g, %zero) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 2, 2, 2>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
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
