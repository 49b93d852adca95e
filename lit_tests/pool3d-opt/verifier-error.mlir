// Input that parses but does not verify: the verifier's message, at the op,
// as one line; exit status 1; no traceback.

// RUN: not pool3d-opt %s 2>&1 | FileCheck %s

// CHECK: {{\A}}{{.*}}verifier-error.mlir:[[# @LINE + 4]]:3: error: type of return operand 0 ('tensor<2xf32>') doesn't match function result type ('tensor<3xf32>') in function @wrong_result_type{{$}}
// CHECK-NOT: Traceback
// CHECK-NOT: {{.}}
func.func @wrong_result_type(%x: tensor<2xf32>) -> tensor<3xf32> {
  return %x : tensor<2xf32>
}
