// RUN: pool3d-opt %s --split-input-file | FileCheck %s
// RUN: pool3d-opt %s --split-input-file --remarks -o %t.mlir 2>&1 | FileCheck %s --check-prefix=REMARK

// Gradients that are NOT max-pool gradients the kernel computes exactly: each
// select_and_scatter (and the pad/slice around it) survives untouched, no call
// is emitted, and --remarks names the reason at the op's location. Remarks go
// to stderr, so they are checked on a second run (prefix REMARK) without the
// module.

// GT picks the LAST maximum of a window; the kernel the first.

// CHECK-LABEL: func.func @select_gt_last_maximum_wins(
// CHECK-NOT: stablehlo.custom_call
// CHECK: "stablehlo.select_and_scatter"
// CHECK: stablehlo.compare GT,
// CHECK: stablehlo.slice
// CHECK-NOT: stablehlo.custom_call
// REMARK: pool3d-max-pool-backward-negative.mlir:[[# @LINE + 5]]:8: remark: max-pool gradient not rewritten: select is compare GT (last maximum wins), not GE (first maximum wins)
func.func @select_gt_last_maximum_wins(%x: tensor<1x2x6x6x6xf32>, %g: tensor<1x2x3x3x3xf32>) -> tensor<1x2x6x6x6xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 1, 1, 1], high = [0, 0, 1, 1, 1], interior = [0, 0, 0, 0, 0] : (tensor<1x2x6x6x6xf32>, tensor<f32>) -> tensor<1x2x8x8x8xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%p, %g, %zero) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
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

// Min pooling: compare LE over a +inf pad.

// CHECK-LABEL: func.func @select_le_min_pooling(
// CHECK-NOT: stablehlo.custom_call
// CHECK: stablehlo.constant dense<0x7F800000>
// CHECK: stablehlo.pad
// CHECK: "stablehlo.select_and_scatter"
// CHECK: stablehlo.compare LE,
// CHECK-NOT: stablehlo.custom_call
// REMARK: pool3d-max-pool-backward-negative.mlir:[[# @LINE + 5]]:8: remark: max-pool gradient not rewritten: select is compare LE (min pooling), not GE (first maximum wins)
func.func @select_le_min_pooling(%x: tensor<1x2x6x6x6xf32>, %g: tensor<1x2x3x3x3xf32>) -> tensor<1x2x6x6x6xf32> {
  %ninf = stablehlo.constant dense<0x7F800000> : tensor<f32>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 1, 1, 1], high = [0, 0, 1, 1, 1], interior = [0, 0, 0, 0, 0] : (tensor<1x2x6x6x6xf32>, tensor<f32>) -> tensor<1x2x8x8x8xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%p, %g, %zero) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare LE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
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

// TOTALORDER orders -0 < +0 and NaNs; the kernel compares as FLOAT.

// CHECK-LABEL: func.func @select_compare_type_totalorder(
// CHECK-NOT: stablehlo.custom_call
// CHECK: "stablehlo.select_and_scatter"
// CHECK: stablehlo.compare GE, {{.*}}, TOTALORDER
// CHECK-NOT: stablehlo.custom_call
// REMARK: pool3d-max-pool-backward-negative.mlir:[[# @LINE + 5]]:8: remark: max-pool gradient not rewritten: select compares with type TOTALORDER, not FLOAT
func.func @select_compare_type_totalorder(%x: tensor<1x2x6x6x6xf32>, %g: tensor<1x2x3x3x3xf32>) -> tensor<1x2x6x6x6xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 1, 1, 1], high = [0, 0, 1, 1, 1], interior = [0, 0, 0, 0, 0] : (tensor<1x2x6x6x6xf32>, tensor<f32>) -> tensor<1x2x8x8x8xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%p, %g, %zero) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
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

// The scatter region must add.

// CHECK-LABEL: func.func @scatter_multiply_not_add(
// CHECK-NOT: stablehlo.custom_call
// CHECK: "stablehlo.select_and_scatter"
// CHECK: stablehlo.multiply
// CHECK-NOT: stablehlo.custom_call
// REMARK: pool3d-max-pool-backward-negative.mlir:[[# @LINE + 5]]:8: remark: max-pool gradient not rewritten: scatter region is not a single stablehlo.add
func.func @scatter_multiply_not_add(%x: tensor<1x2x6x6x6xf32>, %g: tensor<1x2x3x3x3xf32>) -> tensor<1x2x6x6x6xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 1, 1, 1], high = [0, 0, 1, 1, 1], interior = [0, 0, 0, 0, 0] : (tensor<1x2x6x6x6xf32>, tensor<f32>) -> tensor<1x2x8x8x8xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%p, %g, %zero) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.multiply %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<1x2x8x8x8xf32>, tensor<1x2x3x3x3xf32>, tensor<f32>) -> tensor<1x2x8x8x8xf32>
  %r = stablehlo.slice %s [0:1, 0:2, 1:7, 1:7, 1:7] : (tensor<1x2x8x8x8xf32>) -> tensor<1x2x6x6x6xf32>
  return %r : tensor<1x2x6x6x6xf32>
}

// -----

// The scatter region must add.

// CHECK-LABEL: func.func @scatter_maximum_not_add(
// CHECK-NOT: stablehlo.custom_call
// CHECK: "stablehlo.select_and_scatter"
// CHECK: stablehlo.maximum
// CHECK-NOT: stablehlo.custom_call
// REMARK: pool3d-max-pool-backward-negative.mlir:[[# @LINE + 5]]:8: remark: max-pool gradient not rewritten: scatter region is not a single stablehlo.add
func.func @scatter_maximum_not_add(%x: tensor<1x2x6x6x6xf32>, %g: tensor<1x2x3x3x3xf32>) -> tensor<1x2x6x6x6xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 1, 1, 1], high = [0, 0, 1, 1, 1], interior = [0, 0, 0, 0, 0] : (tensor<1x2x6x6x6xf32>, tensor<f32>) -> tensor<1x2x8x8x8xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%p, %g, %zero) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<1x2x8x8x8xf32>, tensor<1x2x3x3x3xf32>, tensor<f32>) -> tensor<1x2x8x8x8xf32>
  %r = stablehlo.slice %s [0:1, 0:2, 1:7, 1:7, 1:7] : (tensor<1x2x8x8x8xf32>) -> tensor<1x2x6x6x6xf32>
  return %r : tensor<1x2x6x6x6xf32>
}

// -----

// Positions no window selects must get 0.

// CHECK-LABEL: func.func @init_nonzero(
// CHECK-NOT: stablehlo.custom_call
// CHECK: stablehlo.constant dense<1.000000e+00>
// CHECK: "stablehlo.select_and_scatter"
// CHECK-NOT: stablehlo.custom_call
// REMARK: pool3d-max-pool-backward-negative.mlir:[[# @LINE + 5]]:8: remark: max-pool gradient not rewritten: init value is not the constant +0
func.func @init_nonzero(%x: tensor<1x2x6x6x6xf32>, %g: tensor<1x2x3x3x3xf32>) -> tensor<1x2x6x6x6xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 1, 1, 1], high = [0, 0, 1, 1, 1], interior = [0, 0, 0, 0, 0] : (tensor<1x2x6x6x6xf32>, tensor<f32>) -> tensor<1x2x8x8x8xf32>
  %zero = stablehlo.constant dense<1.000000e+00> : tensor<f32>
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

// -0.0: unselected positions would be -0, the kernel writes +0.

// CHECK-LABEL: func.func @init_negative_zero(
// CHECK-NOT: stablehlo.custom_call
// CHECK: stablehlo.constant dense<-0.000000e+00>
// CHECK: "stablehlo.select_and_scatter"
// CHECK-NOT: stablehlo.custom_call
// REMARK: pool3d-max-pool-backward-negative.mlir:[[# @LINE + 5]]:8: remark: max-pool gradient not rewritten: init value is not the constant +0
func.func @init_negative_zero(%x: tensor<1x2x6x6x6xf32>, %g: tensor<1x2x3x3x3xf32>) -> tensor<1x2x6x6x6xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 1, 1, 1], high = [0, 0, 1, 1, 1], interior = [0, 0, 0, 0, 0] : (tensor<1x2x6x6x6xf32>, tensor<f32>) -> tensor<1x2x8x8x8xf32>
  %zero = stablehlo.constant dense<-0.000000e+00> : tensor<f32>
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

// A 0.0 pad can win a window of negatives; the kernel's padding never wins.

// CHECK-LABEL: func.func @pad_value_zero_not_neg_inf(
// CHECK-NOT: stablehlo.custom_call
// CHECK: stablehlo.constant dense<0.000000e+00>
// CHECK: stablehlo.pad
// CHECK: "stablehlo.select_and_scatter"
// CHECK: stablehlo.slice
// CHECK-NOT: stablehlo.custom_call
// REMARK: pool3d-max-pool-backward-negative.mlir:[[# @LINE + 5]]:8: remark: max-pool gradient not rewritten: operand is padded with a value other than -inf
func.func @pad_value_zero_not_neg_inf(%x: tensor<1x2x6x6x6xf32>, %g: tensor<1x2x3x3x3xf32>) -> tensor<1x2x6x6x6xf32> {
  %ninf = stablehlo.constant dense<0.000000e+00> : tensor<f32>
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

// Interior (dilating) padding is not the kernel's padding.

// CHECK-LABEL: func.func @pad_interior(
// CHECK-NOT: stablehlo.custom_call
// CHECK: stablehlo.pad {{.*}} interior = [0, 0, 1, 1, 1]
// CHECK: "stablehlo.select_and_scatter"
// CHECK: stablehlo.slice
// CHECK-NOT: stablehlo.custom_call
// REMARK: pool3d-max-pool-backward-negative.mlir:[[# @LINE + 5]]:8: remark: max-pool gradient not rewritten: operand has interior padding
func.func @pad_interior(%x: tensor<1x2x6x6x6xf32>, %g: tensor<1x2x6x6x6xf32>) -> tensor<1x2x6x6x6xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 1, 1, 1], high = [0, 0, 1, 1, 1], interior = [0, 0, 1, 1, 1] : (tensor<1x2x6x6x6xf32>, tensor<f32>) -> tensor<1x2x13x13x13xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%p, %g, %zero) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<1x2x13x13x13xf32>, tensor<1x2x6x6x6xf32>, tensor<f32>) -> tensor<1x2x13x13x13xf32>
  %r = stablehlo.slice %s [0:1, 0:2, 1:7, 1:7, 1:7] : (tensor<1x2x13x13x13xf32>) -> tensor<1x2x6x6x6xf32>
  return %r : tensor<1x2x6x6x6xf32>
}

// -----

// The slice keeps the low pad and drops the last element instead of cutting the pad off.

// CHECK-LABEL: func.func @slice_does_not_undo_pad(
// CHECK-NOT: stablehlo.custom_call
// CHECK: stablehlo.pad
// CHECK: "stablehlo.select_and_scatter"
// CHECK: stablehlo.slice {{.*}} [0:1, 0:2, 0:6, 0:6, 0:6]
// CHECK-NOT: stablehlo.custom_call
// REMARK: pool3d-max-pool-backward-negative.mlir:[[# @LINE + 5]]:8: remark: max-pool gradient not rewritten: result is not cut back by a stablehlo.slice that exactly undoes the -inf pad
func.func @slice_does_not_undo_pad(%x: tensor<1x2x6x6x6xf32>, %g: tensor<1x2x3x3x3xf32>) -> tensor<1x2x6x6x6xf32> {
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
  %r = stablehlo.slice %s [0:1, 0:2, 0:6, 0:6, 0:6] : (tensor<1x2x8x8x8xf32>) -> tensor<1x2x6x6x6xf32>
  return %r : tensor<1x2x6x6x6xf32>
}

// -----

// Padding both on a pad op and on the attribute.

// CHECK-LABEL: func.func @pad_op_and_attribute_padding(
// CHECK-NOT: stablehlo.custom_call
// CHECK: stablehlo.pad
// CHECK: "stablehlo.select_and_scatter"
// CHECK: padding = dense<{{\[\[}}0, 0], [0, 0], [1, 1], [1, 1], [1, 1]]>
// CHECK: stablehlo.slice
// CHECK-NOT: stablehlo.custom_call
// REMARK: pool3d-max-pool-backward-negative.mlir:[[# @LINE + 5]]:8: remark: max-pool gradient not rewritten: operand is a stablehlo.pad and the op also has padding
func.func @pad_op_and_attribute_padding(%x: tensor<1x2x6x6x6xf32>, %g: tensor<1x2x4x4x4xf32>) -> tensor<1x2x6x6x6xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 1, 1, 1], high = [0, 0, 1, 1, 1], interior = [0, 0, 0, 0, 0] : (tensor<1x2x6x6x6xf32>, tensor<f32>) -> tensor<1x2x8x8x8xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%p, %g, %zero) <{padding = dense<[[0, 0], [0, 0], [1, 1], [1, 1], [1, 1]]> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<1x2x8x8x8xf32>, tensor<1x2x4x4x4xf32>, tensor<f32>) -> tensor<1x2x8x8x8xf32>
  %r = stablehlo.slice %s [0:1, 0:2, 1:7, 1:7, 1:7] : (tensor<1x2x8x8x8xf32>) -> tensor<1x2x6x6x6xf32>
  return %r : tensor<1x2x6x6x6xf32>
}

// -----

// A 4-D pool: window 2x2x2x2.

// CHECK-LABEL: func.func @four_pooled_dims(
// CHECK-NOT: stablehlo.custom_call
// CHECK: "stablehlo.select_and_scatter"
// CHECK: window_dimensions = array<i64: 1, 2, 2, 2, 2>
// CHECK-NOT: stablehlo.custom_call
// REMARK: pool3d-max-pool-backward-negative.mlir:[[# @LINE + 5]]:8: remark: max-pool gradient not rewritten: 4 pooled dimensions [1, 2, 3, 4]; the kernel pools at most 3
func.func @four_pooled_dims(%x: tensor<2x4x4x4x4xf32>, %g: tensor<2x2x2x2x2xf32>) -> tensor<2x4x4x4x4xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 0, 0, 0], high = [0, 0, 0, 0, 0], interior = [0, 0, 0, 0, 0] : (tensor<2x4x4x4x4xf32>, tensor<f32>) -> tensor<2x4x4x4x4xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%p, %g, %zero) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 2, 2, 2, 2>, window_strides = array<i64: 1, 2, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<2x4x4x4x4xf32>, tensor<2x2x2x2x2xf32>, tensor<f32>) -> tensor<2x4x4x4x4xf32>
  %r = stablehlo.slice %s [0:2, 0:4, 0:4, 0:4, 0:4] : (tensor<2x4x4x4x4xf32>) -> tensor<2x4x4x4x4xf32>
  return %r : tensor<2x4x4x4x4xf32>
}

// -----

// Pooled dims 1, 3, 4 with a parallel dim 2 between: no reshape makes them (D, H, W).

// CHECK-LABEL: func.func @pooled_dims_not_contiguous(
// CHECK-NOT: stablehlo.custom_call
// CHECK: "stablehlo.select_and_scatter"
// CHECK: window_dimensions = array<i64: 1, 2, 1, 2, 2>
// CHECK-NOT: stablehlo.custom_call
// REMARK: pool3d-max-pool-backward-negative.mlir:[[# @LINE + 5]]:8: remark: max-pool gradient not rewritten: pooled dimensions [1, 3, 4] are not contiguous: they span 4 dimensions, the kernel pools 3 adjacent ones
func.func @pooled_dims_not_contiguous(%x: tensor<2x4x3x4x4xf32>, %g: tensor<2x2x3x2x2xf32>) -> tensor<2x4x3x4x4xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 0, 0, 0], high = [0, 0, 0, 0, 0], interior = [0, 0, 0, 0, 0] : (tensor<2x4x3x4x4xf32>, tensor<f32>) -> tensor<2x4x3x4x4xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%p, %g, %zero) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 2, 1, 2, 2>, window_strides = array<i64: 1, 2, 1, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<2x4x3x4x4xf32>, tensor<2x2x3x2x2xf32>, tensor<f32>) -> tensor<2x4x3x4x4xf32>
  %r = stablehlo.slice %s [0:2, 0:4, 0:3, 0:4, 0:4] : (tensor<2x4x3x4x4xf32>) -> tensor<2x4x3x4x4xf32>
  return %r : tensor<2x4x3x4x4xf32>
}

// -----

// Integer max pooling.

// CHECK-LABEL: func.func @element_type_i32(
// CHECK-NOT: stablehlo.custom_call
// CHECK: "stablehlo.select_and_scatter"
// CHECK: stablehlo.compare GE, {{.*}}, SIGNED
// CHECK-NOT: stablehlo.custom_call
// REMARK: pool3d-max-pool-backward-negative.mlir:[[# @LINE + 5]]:8: remark: max-pool gradient not rewritten: element type i32 is not one of f32, bf16, f16
func.func @element_type_i32(%x: tensor<1x2x6x6x6xi32>, %g: tensor<1x2x3x3x3xi32>) -> tensor<1x2x6x6x6xi32> {
  %ninf = stablehlo.constant dense<-2147483648> : tensor<i32>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 0, 0, 0], high = [0, 0, 0, 0, 0], interior = [0, 0, 0, 0, 0] : (tensor<1x2x6x6x6xi32>, tensor<i32>) -> tensor<1x2x6x6x6xi32>
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %s = "stablehlo.select_and_scatter"(%p, %g, %zero) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 2, 2, 2>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>):
    %c = stablehlo.compare GE, %a, %b, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<i32>, %b: tensor<i32>):
    %c = stablehlo.add %a, %b : tensor<i32>
    stablehlo.return %c : tensor<i32>
  }) : (tensor<1x2x6x6x6xi32>, tensor<1x2x3x3x3xi32>, tensor<i32>) -> tensor<1x2x6x6x6xi32>
  %r = stablehlo.slice %s [0:1, 0:2, 0:6, 0:6, 0:6] : (tensor<1x2x6x6x6xi32>) -> tensor<1x2x6x6x6xi32>
  return %r : tensor<1x2x6x6x6xi32>
}

// -----

// f64: the kernel has no f64 variant.

// CHECK-LABEL: func.func @element_type_f64(
// CHECK-NOT: stablehlo.custom_call
// CHECK: "stablehlo.select_and_scatter"
// CHECK-NOT: stablehlo.custom_call
// REMARK: pool3d-max-pool-backward-negative.mlir:[[# @LINE + 5]]:8: remark: max-pool gradient not rewritten: element type f64 is not one of f32, bf16, f16
func.func @element_type_f64(%x: tensor<1x2x6x6x6xf64>, %g: tensor<1x2x3x3x3xf64>) -> tensor<1x2x6x6x6xf64> {
  %ninf = stablehlo.constant dense<0xFFF0000000000000> : tensor<f64>
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
  return %r : tensor<1x2x6x6x6xf64>
}

// -----

// 17x17x17 = 4913 taps.

// CHECK-LABEL: func.func @window_over_4096_elements(
// CHECK-NOT: stablehlo.custom_call
// CHECK: "stablehlo.select_and_scatter"
// CHECK: window_dimensions = array<i64: 1, 1, 17, 17, 17>
// CHECK-NOT: stablehlo.custom_call
// REMARK: pool3d-max-pool-backward-negative.mlir:[[# @LINE + 5]]:8: remark: max-pool gradient not rewritten: window has 4913 elements; the kernel allows at most 4096
func.func @window_over_4096_elements(%x: tensor<1x1x17x17x17xf32>, %g: tensor<1x1x1x1x1xf32>) -> tensor<1x1x17x17x17xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 0, 0, 0], high = [0, 0, 0, 0, 0], interior = [0, 0, 0, 0, 0] : (tensor<1x1x17x17x17xf32>, tensor<f32>) -> tensor<1x1x17x17x17xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%p, %g, %zero) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 17, 17, 17>, window_strides = array<i64: 1, 1, 1, 1, 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<1x1x17x17x17xf32>, tensor<1x1x1x1x1xf32>, tensor<f32>) -> tensor<1x1x17x17x17xf32>
  %r = stablehlo.slice %s [0:1, 0:1, 0:17, 0:17, 0:17] : (tensor<1x1x17x17x17xf32>) -> tensor<1x1x17x17x17xf32>
  return %r : tensor<1x1x17x17x17xf32>
}

// -----

// Every window is one element: nothing is pooled.

// CHECK-LABEL: func.func @identity_window(
// CHECK-NOT: stablehlo.custom_call
// CHECK: "stablehlo.select_and_scatter"
// CHECK: window_dimensions = array<i64: 1, 1, 1, 1, 1>
// CHECK-NOT: stablehlo.custom_call
// REMARK: pool3d-max-pool-backward-negative.mlir:[[# @LINE + 5]]:8: remark: max-pool gradient not rewritten: window pools no dimension (every window is 1x1x...)
func.func @identity_window(%x: tensor<1x2x4x4x4xf32>, %g: tensor<1x2x4x4x4xf32>) -> tensor<1x2x4x4x4xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 0, 0, 0], high = [0, 0, 0, 0, 0], interior = [0, 0, 0, 0, 0] : (tensor<1x2x4x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4x4xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%p, %g, %zero) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 1, 1, 1>, window_strides = array<i64: 1, 1, 1, 1, 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<1x2x4x4x4xf32>, tensor<1x2x4x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4x4xf32>
  %r = stablehlo.slice %s [0:1, 0:2, 0:4, 0:4, 0:4] : (tensor<1x2x4x4x4xf32>) -> tensor<1x2x4x4x4xf32>
  return %r : tensor<1x2x4x4x4xf32>
}

// -----

// Complex elements (the verifier admits compare GE, FLOAT on them).

// CHECK-LABEL: func.func @element_type_complex(
// CHECK-NOT: stablehlo.custom_call
// CHECK: "stablehlo.select_and_scatter"
// CHECK: complex<f32>
// CHECK-NOT: stablehlo.custom_call
// REMARK: pool3d-max-pool-backward-negative.mlir:[[# @LINE + 3]]:8: remark: max-pool gradient not rewritten: element type complex<f32> is not one of f32, bf16, f16
func.func @element_type_complex(%x: tensor<1x2x4x4x4xcomplex<f32>>, %g: tensor<1x2x2x2x2xcomplex<f32>>) -> tensor<1x2x4x4x4xcomplex<f32>> {
  %zero = stablehlo.constant dense<(0.000000e+00,0.000000e+00)> : tensor<complex<f32>>
  %s = "stablehlo.select_and_scatter"(%x, %g, %zero) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 2, 2, 2>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<complex<f32>>, %b: tensor<complex<f32>>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<complex<f32>>, tensor<complex<f32>>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<complex<f32>>, %b: tensor<complex<f32>>):
    %c = stablehlo.add %a, %b : tensor<complex<f32>>
    stablehlo.return %c : tensor<complex<f32>>
  }) : (tensor<1x2x4x4x4xcomplex<f32>>, tensor<1x2x2x2x2xcomplex<f32>>, tensor<complex<f32>>) -> tensor<1x2x4x4x4xcomplex<f32>>
  return %s : tensor<1x2x4x4x4xcomplex<f32>>
}

// -----

// A dynamic batch dimension: the kernel call needs static shapes.

// CHECK-LABEL: func.func @dynamic_batch_dim(
// CHECK-NOT: stablehlo.custom_call
// CHECK: "stablehlo.select_and_scatter"
// CHECK: tensor<?x2x4x4x4xf32>
// CHECK-NOT: stablehlo.custom_call
// REMARK: pool3d-max-pool-backward-negative.mlir:[[# @LINE + 3]]:8: remark: max-pool gradient not rewritten: dynamic or unranked shape tensor<?x2x4x4x4xf32>
func.func @dynamic_batch_dim(%x: tensor<?x2x4x4x4xf32>, %g: tensor<?x2x2x2x2xf32>) -> tensor<?x2x4x4x4xf32> {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%x, %g, %zero) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 2, 2, 2>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<?x2x4x4x4xf32>, tensor<?x2x2x2x2xf32>, tensor<f32>) -> tensor<?x2x4x4x4xf32>
  return %s : tensor<?x2x4x4x4xf32>
}

// -----

// compare GE(b, a) is LE(a, b): min pooling in disguise.

// CHECK-LABEL: func.func @select_arguments_swapped(
// CHECK-NOT: stablehlo.custom_call
// CHECK: "stablehlo.select_and_scatter"
// CHECK: stablehlo.compare GE, %arg3, %arg2
// CHECK-NOT: stablehlo.custom_call
// REMARK: pool3d-max-pool-backward-negative.mlir:[[# @LINE + 3]]:8: remark: max-pool gradient not rewritten: select region does not compare its two arguments in order
func.func @select_arguments_swapped(%x: tensor<1x2x4x4x4xf32>, %g: tensor<1x2x2x2x2xf32>) -> tensor<1x2x4x4x4xf32> {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%x, %g, %zero) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 2, 2, 2>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %b, %a, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<1x2x4x4x4xf32>, tensor<1x2x2x2x2xf32>, tensor<f32>) -> tensor<1x2x4x4x4xf32>
  return %s : tensor<1x2x4x4x4xf32>
}

// -----

// A pad with negative edge padding crops x; its result is not x padded.

// CHECK-LABEL: func.func @pad_negative_cropping(
// CHECK-NOT: stablehlo.custom_call
// CHECK: stablehlo.pad {{.*}} low = [0, 0, -1, -1, -1]
// CHECK: "stablehlo.select_and_scatter"
// CHECK-NOT: stablehlo.custom_call
// REMARK: pool3d-max-pool-backward-negative.mlir:[[# @LINE + 5]]:8: remark: max-pool gradient not rewritten: operand pad has negative (cropping) padding
func.func @pad_negative_cropping(%x: tensor<1x2x4x4x4xf32>, %g: tensor<1x2x1x1x1xf32>) -> tensor<1x2x4x4x4xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, -1, -1, -1], high = [0, 0, -1, -1, -1], interior = [0, 0, 0, 0, 0] : (tensor<1x2x4x4x4xf32>, tensor<f32>) -> tensor<1x2x2x2x2xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%p, %g, %zero) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 2, 2, 2>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<1x2x2x2x2xf32>, tensor<1x2x1x1x1xf32>, tensor<f32>) -> tensor<1x2x2x2x2xf32>
  %r = stablehlo.pad %s, %zero, low = [0, 0, 1, 1, 1], high = [0, 0, 1, 1, 1], interior = [0, 0, 0, 0, 0] : (tensor<1x2x2x2x2xf32>, tensor<f32>) -> tensor<1x2x4x4x4xf32>
  return %r : tensor<1x2x4x4x4xf32>
}
