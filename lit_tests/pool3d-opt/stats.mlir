// --stats prints one summary line on stderr; --remarks one line per gradient,
// rewritten or not, at the op's location. Neither touches stdout.

// RUN: pool3d-opt %s --stats -o %t.mlir 2>&1 | FileCheck %s --check-prefix=STATS
// RUN: pool3d-opt %s --remarks -o %t.mlir 2>&1 | FileCheck %s --check-prefix=REMARK
// RUN: pool3d-opt %s --stats --remarks 2>/dev/null | FileCheck %s --check-prefix=STDOUT

// STATS: {{\A}}pool3d: 2 select_and_scatter found, 1 rewritten, 1 missed (recompute strategy: forward max-pool reused 0, inserted 1){{$}}
// STATS-NOT: {{.}}

// REMARK: {{\A}}{{.*}}stats.mlir:[[# @LINE + 11]]:9: remark: max-pool gradient rewritten: NCDHW kernel_size=[2, 2, 2] stride=[2, 2, 2] padding=[0, 0, 0], f32, forward max-pool inserted{{$}}
// REMARK-NEXT: {{^}}{{.*}}stats.mlir:[[# @LINE + 19]]:9: remark: max-pool gradient not rewritten: select is compare GT (last maximum wins), not GE (first maximum wins){{$}}
// REMARK-NOT: {{.}}

// STDOUT-NOT: remark
// STDOUT-NOT: pool3d:
// STDOUT: stablehlo.custom_call @pool3d.max_pooling_3d_backward
// STDOUT-NOT: remark
// STDOUT-NOT: pool3d:
func.func @one_rewritten_one_missed(%x: tensor<1x2x4x4x4xf32>, %g: tensor<1x2x2x2x2xf32>) -> (tensor<1x2x4x4x4xf32>, tensor<1x2x4x4x4xf32>) {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %ge = "stablehlo.select_and_scatter"(%x, %g, %zero) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 2, 2, 2>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<1x2x4x4x4xf32>, tensor<1x2x2x2x2xf32>, tensor<f32>) -> tensor<1x2x4x4x4xf32>
  %gt = "stablehlo.select_and_scatter"(%x, %g, %zero) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 2, 2, 2>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<1x2x4x4x4xf32>, tensor<1x2x2x2x2xf32>, tensor<f32>) -> tensor<1x2x4x4x4xf32>
  return %ge, %gt : tensor<1x2x4x4x4xf32>, tensor<1x2x4x4x4xf32>
}
