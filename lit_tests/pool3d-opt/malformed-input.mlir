// Malformed input: one line `FILE:LINE:COL: error: MESSAGE`, exit status 1, no
// traceback, and no output file: neither a new one nor a change to an existing one.
// ({{\A}} anchors a check at the start of the output: nothing comes before.)

// RUN: not pool3d-opt %s 2>&1 | FileCheck %s
// RUN: not pool3d-opt - < %s 2>&1 | FileCheck %s --check-prefix=STDIN

// RUN: rm -f %t.out
// RUN: not pool3d-opt %s -o %t.out 2>&1 | FileCheck %s
// RUN: not test -e %t.out

// RUN: echo sentinel > %t.keep
// RUN: echo sentinel > %t.expected
// RUN: not pool3d-opt %s -o %t.keep 2>&1 | FileCheck %s
// RUN: diff %t.keep %t.expected

// CHECK: {{\A}}{{.*}}malformed-input.mlir:[[# @LINE + 7]]:8: error: custom op 'stablehlo.bogus' is unknown{{$}}
// CHECK-NOT: Traceback
// CHECK-NOT: {{.}}

// STDIN: {{\A}}<stdin>:[[# @LINE + 3]]:8: error: custom op 'stablehlo.bogus' is unknown{{$}}
// STDIN-NOT: {{.}}
func.func @malformed(%x: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.bogus %x : tensor<2xf32>
  return %0 : tensor<2xf32>
}
