// What --remarks and --stats say with a platform target: one remark per
// select_and_scatter, per forward max pool the second walk meets and per
// neutral call, each at that op's line; one stats line per kind whose counts
// add up (found = rewritten + missed), with only the breakdown of the
// strategy that was used. A gradient's own forward is not called a forward
// "without gradient".

// RUN: pool3d-opt %s --split-input-file --target=cpu --stats 2>&1 >/dev/null | FileCheck %s --check-prefix=STATS
// RUN: pool3d-opt %s --split-input-file --target=cpu --remarks 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK

// STATS: {{\A}}pool3d: 2 select_and_scatter found, 1 rewritten, 1 missed (indices strategy: 1 forward max-pool(s) replaced, 1 gradient(s) from indices, 0 from the input){{$}}
// STATS-NEXT: {{^}}pool3d: 2 forward max-pool(s) met after the gradients, 1 given the forward-output call, 1 missed{{$}}
// STATS-NEXT: {{^}}pool3d: 2 neutral call(s) found, 1 bound, 1 left unbound{{$}}
// STATS-NOT: {{.}}

// RUN: pool3d-opt %s --split-input-file --target=cpu --remarks 2>&1 >/dev/null | not grep "forward without gradient not rewritten"
// REMARK: remarks-and-counts.mlir:[[# @LINE + 11]]:8: remark: max-pool gradient not rewritten: element type f64 is not one of f32, bf16, f16
// REMARK: remarks-and-counts.mlir:[[# @LINE + 3]]:8: remark: max-pool forward of a gradient not rewritten: element type f64 is not one of f32, bf16, f16
func.func @f64_gradient_and_its_forward(%x: tensor<1x2x6x6x6xf64>, %g: tensor<1x2x3x3x3xf64>) -> (tensor<1x2x3x3x3xf64>, tensor<1x2x6x6x6xf64>) {
  %ninf = stablehlo.constant dense<0xFFF0000000000000> : tensor<f64>
  %y = "stablehlo.reduce_window"(%x, %ninf) <{padding = dense<[[0, 0], [0, 0], [1, 1], [1, 1], [1, 1]]> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f64>, %b: tensor<f64>):
    %m = stablehlo.maximum %a, %b : tensor<f64>
    stablehlo.return %m : tensor<f64>
  }) : (tensor<1x2x6x6x6xf64>, tensor<f64>) -> tensor<1x2x3x3x3xf64>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 1, 1, 1], high = [0, 0, 1, 1, 1], interior = [0, 0, 0, 0, 0] : (tensor<1x2x6x6x6xf64>, tensor<f64>) -> tensor<1x2x8x8x8xf64>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f64>
  %s = "stablehlo.select_and_scatter"(%p, %g, %zero) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f64>, %b: tensor<f64>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f64>, tensor<f64>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f64>, %b: tensor<f64>):
    %c = stablehlo.add %a, %b : tensor<f64>
    stablehlo.return %c : tensor<f64>
  }) : (tensor<1x2x8x8x8xf64>, tensor<1x2x3x3x3xf64>, tensor<f64>) -> tensor<1x2x8x8x8xf64>
  %r = stablehlo.slice %s [0:1, 0:2, 1:7, 1:7, 1:7] : (tensor<1x2x8x8x8xf64>) -> tensor<1x2x6x6x6xf64>
  return %y, %r : tensor<1x2x3x3x3xf64>, tensor<1x2x6x6x6xf64>
}

// -----

// REMARK: remarks-and-counts.mlir:[[# @LINE + 3]]:8: remark: max-pool forward without gradient rewritten: NCDHW kernel_size=[3, 3, 3] stride=[2, 2, 2] padding=[1, 1, 1], f32, forward-output call
func.func @inference_forward(%x: tensor<2x3x8x8x8xf32>) -> tensor<2x3x4x4x4xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %y = "stablehlo.reduce_window"(%x, %ninf) <{padding = dense<[[0, 0], [0, 0], [1, 1], [1, 1], [1, 1]]> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) : (tensor<2x3x8x8x8xf32>, tensor<f32>) -> tensor<2x3x4x4x4xf32>
  return %y : tensor<2x3x4x4x4xf32>
}

// -----

// REMARK: remarks-and-counts.mlir:[[# @LINE + 2]]:9: remark: neutral call rewritten: bound to the cpu binding
func.func @neutral_call(%g: tensor<1x2x2x2x2xf32>, %x: tensor<1x2x4x4x4xf32>, %y: tensor<1x2x2x2x2xf32>) -> tensor<1x2x4x4x4xf32> {
  %dx = stablehlo.custom_call @pool3d.max_pooling_3d_backward(%g, %x, %y) {api_version = 4 : i32, backend_config = {data_format = "NCDHW", kernel_size = dense<2> : tensor<3xi64>, output_format = "NCDHW", padding = dense<0> : tensor<3xi64>, stride = dense<2> : tensor<3xi64>}} : (tensor<1x2x2x2x2xf32>, tensor<1x2x4x4x4xf32>, tensor<1x2x2x2x2xf32>) -> tensor<1x2x4x4x4xf32>
  return %dx : tensor<1x2x4x4x4xf32>
}

// -----

// An element type outside the contract: left as it is (splicing the binding in would fail).
// REMARK: remarks-and-counts.mlir:[[# @LINE + 2]]:9: remark: neutral call not rewritten: element type f64 is not one of f32, bf16, f16
func.func @neutral_call_f64(%g: tensor<1x2x2x2x2xf64>, %x: tensor<1x2x4x4x4xf64>) -> tensor<1x2x4x4x4xf64> {
  %dx = stablehlo.custom_call @pool3d.max_pooling_3d_backward_from_input(%g, %x) {api_version = 4 : i32, backend_config = {data_format = "NCDHW", kernel_size = dense<2> : tensor<3xi64>, output_format = "NCDHW", padding = dense<0> : tensor<3xi64>, stride = dense<2> : tensor<3xi64>}} : (tensor<1x2x2x2x2xf64>, tensor<1x2x4x4x4xf64>) -> tensor<1x2x4x4x4xf64>
  return %dx : tensor<1x2x4x4x4xf64>
}

// -----

// REMARK: remarks-and-counts.mlir:[[# @LINE + 10]]:8: remark: max-pool gradient rewritten: NCDHW kernel_size=[2, 2, 2] stride=[2, 2, 2] padding=[0, 0, 0], f32, indices strategy: forward max-pool replaced by the forward call, gradient from its indices, decided by the prior (bindings/cpu/speed.py)
// REMARK-NOT: {{.}}
func.func @gradient_with_its_forward(%x: tensor<1x2x4x4x4xf32>, %g: tensor<1x2x2x2x2xf32>) -> (tensor<1x2x2x2x2xf32>, tensor<1x2x4x4x4xf32>) {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %y = "stablehlo.reduce_window"(%x, %ninf) <{window_dimensions = array<i64: 1, 1, 2, 2, 2>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) : (tensor<1x2x4x4x4xf32>, tensor<f32>) -> tensor<1x2x2x2x2xf32>
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
  return %y, %s : tensor<1x2x2x2x2xf32>, tensor<1x2x4x4x4xf32>
}
