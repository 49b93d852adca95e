// RUN: pool3d-opt %s --split-input-file | FileCheck %s

// JAX's CPU/GPU form: -inf pad, select_and_scatter without padding, slice.
// Pad and slice fold into the kernel's symmetric padding; any asymmetric
// remainder stays an explicit -inf pad with a slice. Ranks other than 5 are
// reshaped (row-major regrouping) to the kernel's rank 5 and back.

// Symmetric padding p=1, NCDHW, rank 5: no reshape; no forward max-pool in the
// function, so exactly one is inserted (padding on its attribute).

// CHECK-LABEL: func.func @ncdhw_k3_s2_p1_f32
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x8x8x8xf32>, %[[G:.*]]: tensor<2x3x4x4x4xf32>)
// CHECK-NOT: stablehlo.pad
// CHECK: %[[Y:.*]] = "stablehlo.reduce_window"(%[[X]], %{{.*}})
// CHECK-SAME: padding = dense<{{\[\[}}0, 0], [0, 0], [1, 1], [1, 1], [1, 1]]>
// CHECK-SAME: window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>
// CHECK-NOT: stablehlo.reduce_window
// CHECK-NOT: stablehlo.reshape
// CHECK: %[[DX:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_backward(%[[G]], %[[X]], %[[Y]])
// CHECK-SAME: api_version = 4 : i32, backend_config = {data_format = "NCDHW", kernel_size = dense<3> : tensor<3xi64>, output_format = "NCDHW", padding = dense<1> : tensor<3xi64>, stride = dense<2> : tensor<3xi64>
// CHECK-SAME: sdy.sharding_rule = #sdy.op_sharding_rule<([i, j, k, l, m], [i, j, n, o, p], [i, j, k, l, m])->([i, j, n, o, p]) {i=2, j=3, k=4, l=4, m=4, n=8, o=8, p=8} need_replication={k, l, m, n, o, p}, custom>
// CHECK-SAME: (tensor<2x3x4x4x4xf32>, tensor<2x3x8x8x8xf32>, tensor<2x3x4x4x4xf32>) -> tensor<2x3x8x8x8xf32>
// CHECK-NOT: stablehlo.select_and_scatter
// CHECK-NOT: stablehlo.slice
// CHECK-NOT: stablehlo.reshape
// CHECK: return %[[DX]]
func.func @ncdhw_k3_s2_p1_f32(%x: tensor<2x3x8x8x8xf32>, %g: tensor<2x3x4x4x4xf32>) -> tensor<2x3x8x8x8xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 1, 1, 1], high = [0, 0, 1, 1, 1], interior = [0, 0, 0, 0, 0] : (tensor<2x3x8x8x8xf32>, tensor<f32>) -> tensor<2x3x10x10x10xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%p, %g, %zero) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<2x3x10x10x10xf32>, tensor<2x3x4x4x4xf32>, tensor<f32>) -> tensor<2x3x10x10x10xf32>
  %r = stablehlo.slice %s [0:2, 0:3, 1:9, 1:9, 1:9] : (tensor<2x3x10x10x10xf32>) -> tensor<2x3x8x8x8xf32>
  return %r : tensor<2x3x8x8x8xf32>
}

// -----

// VALID: JAX still emits a pad and a slice, both no-ops; they fold away.
// NDHWC (flax) window (1,k,k,k,1), rank 5: no reshape.

// CHECK-LABEL: func.func @ndhwc_k2_s2_valid_f32
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x4x4x3xf32>, %[[G:.*]]: tensor<2x2x2x2x3xf32>)
// CHECK-NOT: stablehlo.pad
// CHECK: %[[Y:.*]] = "stablehlo.reduce_window"(%[[X]], %{{.*}})
// CHECK-SAME: padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 2, 2, 2, 1>, window_strides = array<i64: 1, 2, 2, 2, 1>
// CHECK-NOT: stablehlo.reshape
// CHECK: %[[DX:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_backward(%[[G]], %[[X]], %[[Y]])
// CHECK-SAME: api_version = 4 : i32, backend_config = {data_format = "NDHWC", kernel_size = dense<2> : tensor<3xi64>, output_format = "NDHWC", padding = dense<0> : tensor<3xi64>, stride = dense<2> : tensor<3xi64>
// CHECK-SAME: sdy.sharding_rule = #sdy.op_sharding_rule<([i, k, l, m, j], [i, n, o, p, j], [i, k, l, m, j])->([i, n, o, p, j]) {i=2, j=3, k=2, l=2, m=2, n=4, o=4, p=4} need_replication={k, l, m, n, o, p}, custom>
// CHECK-SAME: (tensor<2x2x2x2x3xf32>, tensor<2x4x4x4x3xf32>, tensor<2x2x2x2x3xf32>) -> tensor<2x4x4x4x3xf32>
// CHECK-NOT: stablehlo.select_and_scatter
// CHECK-NOT: stablehlo.slice
// CHECK-NOT: stablehlo.reshape
// CHECK: return %[[DX]]
func.func @ndhwc_k2_s2_valid_f32(%x: tensor<2x4x4x4x3xf32>, %g: tensor<2x2x2x2x3xf32>) -> tensor<2x4x4x4x3xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 0, 0, 0], high = [0, 0, 0, 0, 0], interior = [0, 0, 0, 0, 0] : (tensor<2x4x4x4x3xf32>, tensor<f32>) -> tensor<2x4x4x4x3xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%p, %g, %zero) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 2, 2, 2, 1>, window_strides = array<i64: 1, 2, 2, 2, 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<2x4x4x4x3xf32>, tensor<2x2x2x2x3xf32>, tensor<f32>) -> tensor<2x4x4x4x3xf32>
  %r = stablehlo.slice %s [0:2, 0:4, 0:4, 0:4, 0:3] : (tensor<2x4x4x4x3xf32>) -> tensor<2x4x4x4x3xf32>
  return %r : tensor<2x4x4x4x3xf32>
}

// -----

// Unbatched (C, D, H, W), window (1,k,k,k): reshaped to rank 5 with B=1 and back.

// CHECK-LABEL: func.func @unbatched_cdhw_k2_s2_rank4_f32
// CHECK-SAME: (%[[X:.*]]: tensor<3x4x4x4xf32>, %[[G:.*]]: tensor<3x2x2x2xf32>)
// CHECK: %[[Y:.*]] = "stablehlo.reduce_window"(%[[X]], %{{.*}})
// CHECK-DAG: %[[G5:.*]] = stablehlo.reshape %[[G]] : (tensor<3x2x2x2xf32>) -> tensor<1x3x2x2x2xf32>
// CHECK-DAG: %[[X5:.*]] = stablehlo.reshape %[[X]] : (tensor<3x4x4x4xf32>) -> tensor<1x3x4x4x4xf32>
// CHECK-DAG: %[[Y5:.*]] = stablehlo.reshape %[[Y]] : (tensor<3x2x2x2xf32>) -> tensor<1x3x2x2x2xf32>
// CHECK: %[[DX5:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_backward(%[[G5]], %[[X5]], %[[Y5]])
// CHECK-SAME: api_version = 4 : i32, backend_config = {data_format = "NCDHW", kernel_size = dense<2> : tensor<3xi64>, output_format = "NCDHW", padding = dense<0> : tensor<3xi64>, stride = dense<2> : tensor<3xi64>
// CHECK-SAME: -> tensor<1x3x4x4x4xf32>
// CHECK: %[[DX:.*]] = stablehlo.reshape %[[DX5]] : (tensor<1x3x4x4x4xf32>) -> tensor<3x4x4x4xf32>
// CHECK-NOT: stablehlo.select_and_scatter
// CHECK-NOT: stablehlo.slice
// CHECK: return %[[DX]]
func.func @unbatched_cdhw_k2_s2_rank4_f32(%x: tensor<3x4x4x4xf32>, %g: tensor<3x2x2x2xf32>) -> tensor<3x4x4x4xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 0, 0], high = [0, 0, 0, 0], interior = [0, 0, 0, 0] : (tensor<3x4x4x4xf32>, tensor<f32>) -> tensor<3x4x4x4xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%p, %g, %zero) <{padding = dense<0> : tensor<4x2xi64>, window_dimensions = array<i64: 1, 2, 2, 2>, window_strides = array<i64: 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<3x4x4x4xf32>, tensor<3x2x2x2xf32>, tensor<f32>) -> tensor<3x4x4x4xf32>
  %r = stablehlo.slice %s [0:3, 0:4, 0:4, 0:4] : (tensor<3x4x4x4xf32>) -> tensor<3x4x4x4xf32>
  return %r : tensor<3x4x4x4xf32>
}

// -----

// 2-D max pool, NCHW window (1,1,k,k): a unit depth is inserted, kernel_size [1,k,k].

// CHECK-LABEL: func.func @nchw_2d_k2_s2_rank4_f32
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4x4xf32>, %[[G:.*]]: tensor<2x3x2x2xf32>)
// CHECK: %[[Y:.*]] = "stablehlo.reduce_window"(%[[X]], %{{.*}})
// CHECK-DAG: %[[G5:.*]] = stablehlo.reshape %[[G]] : (tensor<2x3x2x2xf32>) -> tensor<2x3x1x2x2xf32>
// CHECK-DAG: %[[X5:.*]] = stablehlo.reshape %[[X]] : (tensor<2x3x4x4xf32>) -> tensor<2x3x1x4x4xf32>
// CHECK-DAG: %[[Y5:.*]] = stablehlo.reshape %[[Y]] : (tensor<2x3x2x2xf32>) -> tensor<2x3x1x2x2xf32>
// CHECK: %[[DX5:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_backward(%[[G5]], %[[X5]], %[[Y5]])
// CHECK-SAME: api_version = 4 : i32, backend_config = {data_format = "NCDHW", kernel_size = dense<[1, 2, 2]> : tensor<3xi64>, output_format = "NCDHW", padding = dense<0> : tensor<3xi64>, stride = dense<[1, 2, 2]> : tensor<3xi64>
// CHECK: %[[DX:.*]] = stablehlo.reshape %[[DX5]] : (tensor<2x3x1x4x4xf32>) -> tensor<2x3x4x4xf32>
// CHECK-NOT: stablehlo.select_and_scatter
// CHECK: return %[[DX]]
func.func @nchw_2d_k2_s2_rank4_f32(%x: tensor<2x3x4x4xf32>, %g: tensor<2x3x2x2xf32>) -> tensor<2x3x4x4xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 0, 0], high = [0, 0, 0, 0], interior = [0, 0, 0, 0] : (tensor<2x3x4x4xf32>, tensor<f32>) -> tensor<2x3x4x4xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%p, %g, %zero) <{padding = dense<0> : tensor<4x2xi64>, window_dimensions = array<i64: 1, 1, 2, 2>, window_strides = array<i64: 1, 1, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<2x3x4x4xf32>, tensor<2x3x2x2xf32>, tensor<f32>) -> tensor<2x3x4x4xf32>
  %r = stablehlo.slice %s [0:2, 0:3, 0:4, 0:4] : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  return %r : tensor<2x3x4x4xf32>
}

// -----

// vmap over flax NDHWC: rank 6, window (1,1,k,k,k,1). The two leading dims fold
// into B (5*2=10), the trailing one is C: NDHWC.

// CHECK-LABEL: func.func @vmap_rank6_k2_s2_f32
// CHECK-SAME: (%[[X:.*]]: tensor<5x2x4x4x4x3xf32>, %[[G:.*]]: tensor<5x2x2x2x2x3xf32>)
// CHECK: %[[Y:.*]] = "stablehlo.reduce_window"(%[[X]], %{{.*}})
// CHECK-DAG: %[[G5:.*]] = stablehlo.reshape %[[G]] : (tensor<5x2x2x2x2x3xf32>) -> tensor<10x2x2x2x3xf32>
// CHECK-DAG: %[[X5:.*]] = stablehlo.reshape %[[X]] : (tensor<5x2x4x4x4x3xf32>) -> tensor<10x4x4x4x3xf32>
// CHECK-DAG: %[[Y5:.*]] = stablehlo.reshape %[[Y]] : (tensor<5x2x2x2x2x3xf32>) -> tensor<10x2x2x2x3xf32>
// CHECK: %[[DX5:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_backward(%[[G5]], %[[X5]], %[[Y5]])
// CHECK-SAME: api_version = 4 : i32, backend_config = {data_format = "NDHWC", kernel_size = dense<2> : tensor<3xi64>, output_format = "NDHWC", padding = dense<0> : tensor<3xi64>, stride = dense<2> : tensor<3xi64>
// CHECK: %[[DX:.*]] = stablehlo.reshape %[[DX5]] : (tensor<10x4x4x4x3xf32>) -> tensor<5x2x4x4x4x3xf32>
// CHECK-NOT: stablehlo.select_and_scatter
// CHECK: return %[[DX]]
func.func @vmap_rank6_k2_s2_f32(%x: tensor<5x2x4x4x4x3xf32>, %g: tensor<5x2x2x2x2x3xf32>) -> tensor<5x2x4x4x4x3xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 0, 0, 0, 0], high = [0, 0, 0, 0, 0, 0], interior = [0, 0, 0, 0, 0, 0] : (tensor<5x2x4x4x4x3xf32>, tensor<f32>) -> tensor<5x2x4x4x4x3xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = "stablehlo.select_and_scatter"(%p, %g, %zero) <{padding = dense<0> : tensor<6x2xi64>, window_dimensions = array<i64: 1, 1, 2, 2, 2, 1>, window_strides = array<i64: 1, 1, 2, 2, 2, 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<5x2x4x4x4x3xf32>, tensor<5x2x2x2x2x3xf32>, tensor<f32>) -> tensor<5x2x4x4x4x3xf32>
  %r = stablehlo.slice %s [0:5, 0:2, 0:4, 0:4, 0:4, 0:3] : (tensor<5x2x4x4x4x3xf32>) -> tensor<5x2x4x4x4x3xf32>
  return %r : tensor<5x2x4x4x4x3xf32>
}

// -----

// SAME with an even window pads low 0, high 1. The symmetric part (0) goes to the
// kernel; the remainder stays an explicit -inf pad of x, and the result is cut
// back by a slice.

// CHECK-LABEL: func.func @same_even_k2_s1_asymmetric_f32
// CHECK-SAME: (%[[X:.*]]: tensor<1x2x6x6x6xf32>, %[[G:.*]]: tensor<1x2x6x6x6xf32>)
// CHECK: %[[NINF:.*]] = stablehlo.constant dense<0xFF800000> : tensor<f32>
// CHECK: %[[XP:.*]] = stablehlo.pad %[[X]], %[[NINF]], low = [0, 0, 0, 0, 0], high = [0, 0, 1, 1, 1], interior = [0, 0, 0, 0, 0]
// CHECK-SAME: -> tensor<1x2x7x7x7xf32>
// CHECK-NOT: stablehlo.pad
// CHECK: %[[Y:.*]] = "stablehlo.reduce_window"(%[[X]], %[[NINF]])
// CHECK-SAME: padding = dense<{{\[\[}}0, 0], [0, 0], [0, 1], [0, 1], [0, 1]]>
// CHECK: %[[DXP:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_backward(%[[G]], %[[XP]], %[[Y]])
// CHECK-SAME: api_version = 4 : i32, backend_config = {data_format = "NCDHW", kernel_size = dense<2> : tensor<3xi64>, output_format = "NCDHW", padding = dense<0> : tensor<3xi64>, stride = dense<1> : tensor<3xi64>
// CHECK-SAME: (tensor<1x2x6x6x6xf32>, tensor<1x2x7x7x7xf32>, tensor<1x2x6x6x6xf32>) -> tensor<1x2x7x7x7xf32>
// CHECK: %[[DX:.*]] = stablehlo.slice %[[DXP]] [0:1, 0:2, 0:6, 0:6, 0:6] : (tensor<1x2x7x7x7xf32>) -> tensor<1x2x6x6x6xf32>
// CHECK-NOT: stablehlo.select_and_scatter
// CHECK-NOT: stablehlo.pad
// CHECK: return %[[DX]]
func.func @same_even_k2_s1_asymmetric_f32(%x: tensor<1x2x6x6x6xf32>, %g: tensor<1x2x6x6x6xf32>) -> tensor<1x2x6x6x6xf32> {
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

// bf16: -inf is 0xFF80; the pad's constant becomes the init of the inserted
// forward max-pool, and the call keeps the element type.

// CHECK-LABEL: func.func @ncdhw_k3_s2_p1_bf16
// CHECK-SAME: (%[[X:.*]]: tensor<1x2x6x6x6xbf16>, %[[G:.*]]: tensor<1x2x3x3x3xbf16>)
// CHECK: %[[NINF:.*]] = stablehlo.constant dense<0xFF80> : tensor<bf16>
// CHECK-NOT: stablehlo.pad
// CHECK: %[[Y:.*]] = "stablehlo.reduce_window"(%[[X]], %[[NINF]])
// CHECK-SAME: padding = dense<{{\[\[}}0, 0], [0, 0], [1, 1], [1, 1], [1, 1]]>
// CHECK: stablehlo.maximum {{.*}} : tensor<bf16>
// CHECK: %[[DX:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_backward(%[[G]], %[[X]], %[[Y]])
// CHECK-SAME: api_version = 4 : i32, backend_config = {data_format = "NCDHW", kernel_size = dense<3> : tensor<3xi64>, output_format = "NCDHW", padding = dense<1> : tensor<3xi64>, stride = dense<2> : tensor<3xi64>
// CHECK-SAME: (tensor<1x2x3x3x3xbf16>, tensor<1x2x6x6x6xbf16>, tensor<1x2x3x3x3xbf16>) -> tensor<1x2x6x6x6xbf16>
// CHECK-NOT: stablehlo.select_and_scatter
// CHECK-NOT: stablehlo.slice
// CHECK: return %[[DX]]
func.func @ncdhw_k3_s2_p1_bf16(%x: tensor<1x2x6x6x6xbf16>, %g: tensor<1x2x3x3x3xbf16>) -> tensor<1x2x6x6x6xbf16> {
  %ninf = stablehlo.constant dense<0xFF80> : tensor<bf16>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 1, 1, 1], high = [0, 0, 1, 1, 1], interior = [0, 0, 0, 0, 0] : (tensor<1x2x6x6x6xbf16>, tensor<bf16>) -> tensor<1x2x8x8x8xbf16>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
  %s = "stablehlo.select_and_scatter"(%p, %g, %zero) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<bf16>, %b: tensor<bf16>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<bf16>, tensor<bf16>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<bf16>, %b: tensor<bf16>):
    %c = stablehlo.add %a, %b : tensor<bf16>
    stablehlo.return %c : tensor<bf16>
  }) : (tensor<1x2x8x8x8xbf16>, tensor<1x2x3x3x3xbf16>, tensor<bf16>) -> tensor<1x2x8x8x8xbf16>
  %r = stablehlo.slice %s [0:1, 0:2, 1:7, 1:7, 1:7] : (tensor<1x2x8x8x8xbf16>) -> tensor<1x2x6x6x6xbf16>
  return %r : tensor<1x2x6x6x6xbf16>
}

// -----

// f16: -inf is 0xFC00; the pad's constant becomes the init of the inserted
// forward max-pool, and the call keeps the element type.

// CHECK-LABEL: func.func @ncdhw_k3_s2_p1_f16
// CHECK-SAME: (%[[X:.*]]: tensor<1x2x6x6x6xf16>, %[[G:.*]]: tensor<1x2x3x3x3xf16>)
// CHECK: %[[NINF:.*]] = stablehlo.constant dense<0xFC00> : tensor<f16>
// CHECK-NOT: stablehlo.pad
// CHECK: %[[Y:.*]] = "stablehlo.reduce_window"(%[[X]], %[[NINF]])
// CHECK-SAME: padding = dense<{{\[\[}}0, 0], [0, 0], [1, 1], [1, 1], [1, 1]]>
// CHECK: stablehlo.maximum {{.*}} : tensor<f16>
// CHECK: %[[DX:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_backward(%[[G]], %[[X]], %[[Y]])
// CHECK-SAME: api_version = 4 : i32, backend_config = {data_format = "NCDHW", kernel_size = dense<3> : tensor<3xi64>, output_format = "NCDHW", padding = dense<1> : tensor<3xi64>, stride = dense<2> : tensor<3xi64>
// CHECK-SAME: (tensor<1x2x3x3x3xf16>, tensor<1x2x6x6x6xf16>, tensor<1x2x3x3x3xf16>) -> tensor<1x2x6x6x6xf16>
// CHECK-NOT: stablehlo.select_and_scatter
// CHECK-NOT: stablehlo.slice
// CHECK: return %[[DX]]
func.func @ncdhw_k3_s2_p1_f16(%x: tensor<1x2x6x6x6xf16>, %g: tensor<1x2x3x3x3xf16>) -> tensor<1x2x6x6x6xf16> {
  %ninf = stablehlo.constant dense<0xFC00> : tensor<f16>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 1, 1, 1], high = [0, 0, 1, 1, 1], interior = [0, 0, 0, 0, 0] : (tensor<1x2x6x6x6xf16>, tensor<f16>) -> tensor<1x2x8x8x8xf16>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f16>
  %s = "stablehlo.select_and_scatter"(%p, %g, %zero) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f16>, %b: tensor<f16>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f16>, tensor<f16>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<f16>, %b: tensor<f16>):
    %c = stablehlo.add %a, %b : tensor<f16>
    stablehlo.return %c : tensor<f16>
  }) : (tensor<1x2x8x8x8xf16>, tensor<1x2x3x3x3xf16>, tensor<f16>) -> tensor<1x2x8x8x8xf16>
  %r = stablehlo.slice %s [0:1, 0:2, 1:7, 1:7, 1:7] : (tensor<1x2x8x8x8xf16>) -> tensor<1x2x6x6x6xf16>
  return %r : tensor<1x2x6x6x6xf16>
}

// -----

// The forward max-pool is in the function (jax.vjp whose primal output is
// used; JAX's own init broadcast_in_dim(-inf)): its result is the call's third
// operand and no second reduce_window is inserted.

// CHECK-LABEL: func.func @forward_present_is_reused_f32
// CHECK-SAME: (%[[X:.*]]: tensor<1x2x6x6x6xf32>)
// CHECK: %[[Y:.*]] = "stablehlo.reduce_window"(%[[X]], %{{.*}})
// CHECK-NOT: stablehlo.reduce_window
// CHECK: %[[DY:.*]] = stablehlo.multiply %[[Y]], %{{.*}}
// CHECK-NOT: stablehlo.reduce_window
// CHECK-NOT: stablehlo.pad
// CHECK: %[[DX:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_backward(%[[DY]], %[[X]], %[[Y]])
// CHECK-SAME: api_version = 4 : i32, backend_config = {data_format = "NCDHW", kernel_size = dense<3> : tensor<3xi64>, output_format = "NCDHW", padding = dense<1> : tensor<3xi64>, stride = dense<2> : tensor<3xi64>
// CHECK-NOT: stablehlo.select_and_scatter
// CHECK-NOT: stablehlo.slice
// CHECK: return %[[Y]], %[[DX]]
func.func @forward_present_is_reused_f32(%arg0: tensor<1x2x6x6x6xf32>) -> (tensor<1x2x3x3x3xf32>, tensor<1x2x6x6x6xf32>) {
  %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<f32>
  %1 = "stablehlo.reduce_window"(%arg0, %0) <{base_dilations = array<i64: 1, 1, 1, 1, 1>, padding = dense<[[0, 0], [0, 0], [1, 1], [1, 1], [1, 1]]> : tensor<5x2xi64>, window_dilations = array<i64: 1, 1, 1, 1, 1>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%arg1: tensor<f32>, %arg2: tensor<f32>):
    %7 = stablehlo.maximum %arg1, %arg2 : tensor<f32>
    stablehlo.return %7 : tensor<f32>
  }) : (tensor<1x2x6x6x6xf32>, tensor<f32>) -> tensor<1x2x3x3x3xf32>
  %cst_0 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
  %2 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<1x2x3x3x3xf32>
  %3 = stablehlo.multiply %1, %2 : tensor<1x2x3x3x3xf32>
  %cst_1 = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %4 = stablehlo.pad %arg0, %cst_1, low = [0, 0, 1, 1, 1], high = [0, 0, 1, 1, 1], interior = [0, 0, 0, 0, 0] : (tensor<1x2x6x6x6xf32>, tensor<f32>) -> tensor<1x2x8x8x8xf32>
  %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %5 = "stablehlo.select_and_scatter"(%4, %3, %cst_2) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%arg1: tensor<f32>, %arg2: tensor<f32>):
    %7 = stablehlo.compare GE, %arg1, %arg2, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %7 : tensor<i1>
  }, {
  ^bb0(%arg1: tensor<f32>, %arg2: tensor<f32>):
    %7 = stablehlo.add %arg1, %arg2 : tensor<f32>
    stablehlo.return %7 : tensor<f32>
  }) : (tensor<1x2x8x8x8xf32>, tensor<1x2x3x3x3xf32>, tensor<f32>) -> tensor<1x2x8x8x8xf32>
  %6 = stablehlo.slice %5 [0:1, 0:2, 1:7, 1:7, 1:7] : (tensor<1x2x8x8x8xf32>) -> tensor<1x2x6x6x6xf32>
  return %1, %6 : tensor<1x2x3x3x3xf32>, tensor<1x2x6x6x6xf32>
}
