// --split-input-file: an error in the second chunk is reported at its line in
// the whole file; the other chunks are still processed and printed; exit 1.
// With -o, no output file is written when any chunk fails.

// RUN: not pool3d-opt %s --split-input-file 2>%t.err | FileCheck %s
// RUN: FileCheck %s --check-prefix=ERR --input-file %t.err
// RUN: rm -f %t.out
// RUN: not pool3d-opt %s --split-input-file -o %t.out 2>&1 | FileCheck %s --check-prefix=ERR
// RUN: not test -e %t.out

// ERR: {{\A}}{{.*}}split-input-file-error.mlir:[[# @LINE + 15]]:22: error: use of value '%x' expects different type than prior uses: 'tensor<3xf32>' vs 'tensor<2xf32>'{{$}}
// ERR-NOT: Traceback
// ERR-NOT: {{.}}

// CHECK-LABEL: func.func @first_chunk
// CHECK-NOT: func.func @second_chunk
// CHECK: // -----
// CHECK-LABEL: func.func @third_chunk
func.func @first_chunk(%x: tensor<2xf32>) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}

// -----

func.func @second_chunk(%x: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.add %x, %x : tensor<3xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @third_chunk(%x: tensor<2xf32>) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}
