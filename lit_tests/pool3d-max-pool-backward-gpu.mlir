// RUN: env POOL3D_GPU_IMPL=pallas pool3d-opt %s --split-input-file --target=gpu --strategy=indices | FileCheck %s
// RUN: env POOL3D_GPU_IMPL=pallas pool3d-opt %s --split-input-file --target=gpu --strategy=recompute | FileCheck %s --check-prefix=RECOMPUTE
// RUN: env POOL3D_GPU_IMPL=pallas pool3d-opt %s --split-input-file --target=gpu | FileCheck %s --check-prefix=AUTO
// RUN: env POOL3D_GPU_IMPL=pallas pool3d-opt %s --split-input-file --target=gpu --remarks 2>&1 >/dev/null | FileCheck %s --check-prefix=AUTO-REMARK
// RUN: env POOL3D_GPU_IMPL=pallas pool3d-opt %s --split-input-file --target=gpu --strategy=indices --remarks 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK
// RUN: env POOL3D_GPU_INTERPRET=1 pool3d-opt %s --split-input-file --target=gpu --strategy=indices | FileCheck %s --check-prefix=INTERPRET

// The gpu target: the binding's Pallas kernels, lowered for cuda, are spliced
// in as Triton calls (`__gpu$xla.gpu.triton`, the Triton IR as bytecode in
// `ir`, one program of 128 elements per grid step). Flat views (reshapes) go
// in and out of every kernel. Under --strategy=auto the binding is used only
// where a device run measured it faster than XLA:GPU (none of these cases):
// the remark names the measured ratio and how to opt in (a neutral call left
// by an earlier run is still bound). With POOL3D_GPU_INTERPRET=1 the kernels
// are plain StableHLO (Pallas interpret mode) that any backend runs. A NOT
// placed after a function's last positive match covers the rest of its block
// (up to the next LABEL); INTERPRET's NOTs, before and after its one match,
// cover the whole output.
// INTERPRET-NOT: __gpu$xla.gpu.triton
// INTERPRET-NOT: stablehlo.select_and_scatter
// INTERPRET: stablehlo.while
// INTERPRET-NOT: __gpu$xla.gpu.triton
// INTERPRET-NOT: stablehlo.select_and_scatter

// -----

// A training step: the forward max pool becomes the window kernel (maxima and
// indices), the gradient the gather kernel (each input element reads the
// windows that cover it: 2*3*8*8*8 = 3072 elements, 24 programs).

// CHECK-LABEL: func.func @training_step_forward_and_gather_kernels
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x8x8x8xf32>, %[[G:.*]]: tensor<2x3x4x4x4xf32>)
// CHECK: %[[XF:.*]] = stablehlo.reshape %[[X]] : (tensor<2x3x8x8x8xf32>) -> tensor<3072xf32>
// CHECK: %[[F:.*]]:2 = stablehlo.custom_call @__gpu$xla.gpu.triton(%[[XF]])
// CHECK-SAME: grid_x = 3 : i32, grid_y = 1 : i32, grid_z = 1 : i32
// CHECK-SAME: name = "pool3d_gpu_forward", num_stages = 1 : i32, num_warps = 4 : i32
// CHECK-SAME: (tensor<3072xf32>) -> (tensor<384xf32>, tensor<384xi16>)
// CHECK: %[[Y:.*]] = stablehlo.reshape %[[F]]#0 : (tensor<384xf32>) -> tensor<2x3x4x4x4xf32>
// CHECK: %[[GF:.*]] = stablehlo.reshape %[[G]] : (tensor<2x3x4x4x4xf32>) -> tensor<384xf32>
// CHECK: %[[DXF:.*]] = stablehlo.custom_call @__gpu$xla.gpu.triton(%[[GF]], %{{[0-9]+}})
// CHECK-SAME: grid_x = 24 : i32
// CHECK-SAME: name = "pool3d_gpu_gather"
// CHECK-SAME: (tensor<384xf32>, tensor<384xi16>) -> tensor<3072xf32>
// CHECK: %[[DX:.*]] = stablehlo.reshape %[[DXF]] : (tensor<3072xf32>) -> tensor<2x3x8x8x8xf32>
// CHECK-NOT: stablehlo.select_and_scatter
// CHECK-NOT: stablehlo.reduce_window
// CHECK: return %[[Y]], %[[DX]]
// RECOMPUTE-LABEL: func.func @training_step_forward_and_gather_kernels
// RECOMPUTE-NOT: name = "pool3d_gpu_forward
// RECOMPUTE: stablehlo.reduce_window
// RECOMPUTE-NOT: name = "pool3d_gpu_forward
// RECOMPUTE: name = "pool3d_gpu_select"
// RECOMPUTE-NOT: name = "pool3d_gpu_forward
// RECOMPUTE: name = "pool3d_gpu_gather"
// RECOMPUTE-NOT: name = "pool3d_gpu_forward
// AUTO-LABEL: func.func @training_step_forward_and_gather_kernels
// AUTO-NOT: __gpu$xla.gpu.triton
// AUTO: stablehlo.reduce_window
// AUTO: "stablehlo.select_and_scatter"
// AUTO-NOT: __gpu$xla.gpu.triton
// AUTO-REMARK: pool3d-max-pool-backward-gpu.mlir:[[# @LINE + 11]]:8: remark: max-pool gradient not rewritten: gpu binding: XLA:GPU measured faster for NCDHW f32 overlapping windows, small input (XLA time / kernel time 0.78x on NVIDIA H200, {{.*}}); ask for strategy 'indices' or 'recompute' to use it anyway
// REMARK: pool3d-max-pool-backward-gpu.mlir:[[# @LINE + 10]]:8: remark: max-pool gradient rewritten: NCDHW kernel_size=[3, 3, 3] stride=[2, 2, 2] padding=[1, 1, 1], f32, indices strategy: forward max-pool replaced by the forward call, gradient from its indices
func.func @training_step_forward_and_gather_kernels(%x: tensor<2x3x8x8x8xf32>, %g: tensor<2x3x4x4x4xf32>) -> (tensor<2x3x4x4x4xf32>, tensor<2x3x8x8x8xf32>) {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %y = "stablehlo.reduce_window"(%x, %ninf) <{padding = dense<[[0, 0], [0, 0], [1, 1], [1, 1], [1, 1]]> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) : (tensor<2x3x8x8x8xf32>, tensor<f32>) -> tensor<2x3x4x4x4xf32>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 1, 1, 1], high = [0, 0, 1, 1, 1], interior = [0, 0, 0, 0, 0] : (tensor<2x3x8x8x8xf32>, tensor<f32>) -> tensor<2x3x10x10x10xf32>
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
  return %y, %r : tensor<2x3x4x4x4xf32>, tensor<2x3x8x8x8xf32>
}

// -----

// A bare gradient, channels-last bf16 (no forward in the function): the window
// kernel stores only the indices, then the gather kernel.

// CHECK-LABEL: func.func @bare_gradient_indices_then_gather_bf16
// CHECK-NOT: stablehlo.select_and_scatter
// CHECK: stablehlo.custom_call @__gpu$xla.gpu.triton
// CHECK-SAME: name = "pool3d_gpu_indices"
// CHECK-SAME: (tensor<2048xbf16>) -> tensor<256xi16>
// CHECK: stablehlo.custom_call @__gpu$xla.gpu.triton
// CHECK-SAME: name = "pool3d_gpu_gather"
// CHECK-SAME: (tensor<256xbf16>, tensor<256xi16>) -> tensor<2048xbf16>
// CHECK-NOT: stablehlo.select_and_scatter
// RECOMPUTE-LABEL: func.func @bare_gradient_indices_then_gather_bf16
// RECOMPUTE-NOT: name = "pool3d_gpu_forward
// RECOMPUTE: stablehlo.reduce_window
// RECOMPUTE-NOT: name = "pool3d_gpu_forward
// RECOMPUTE: name = "pool3d_gpu_select"
// RECOMPUTE-NOT: name = "pool3d_gpu_forward
// RECOMPUTE: name = "pool3d_gpu_gather"
// RECOMPUTE-NOT: name = "pool3d_gpu_forward
// AUTO-LABEL: func.func @bare_gradient_indices_then_gather_bf16
// AUTO-NOT: __gpu$xla.gpu.triton
// AUTO: "stablehlo.select_and_scatter"
// AUTO-NOT: __gpu$xla.gpu.triton
func.func @bare_gradient_indices_then_gather_bf16(%x: tensor<2x8x8x8x2xbf16>, %g: tensor<2x4x4x4x2xbf16>) -> tensor<2x8x8x8x2xbf16> {
  %ninf = stablehlo.constant dense<0xFF80> : tensor<bf16>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
  %p = stablehlo.pad %x, %ninf, low = [0, 0, 0, 0, 0], high = [0, 0, 0, 0, 0], interior = [0, 0, 0, 0, 0] : (tensor<2x8x8x8x2xbf16>, tensor<bf16>) -> tensor<2x8x8x8x2xbf16>
  %s = "stablehlo.select_and_scatter"(%p, %g, %zero) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 2, 2, 2, 1>, window_strides = array<i64: 1, 2, 2, 2, 1>}> ({
  ^bb0(%a: tensor<bf16>, %b: tensor<bf16>):
    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<bf16>, tensor<bf16>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<bf16>, %b: tensor<bf16>):
    %c = stablehlo.add %a, %b : tensor<bf16>
    stablehlo.return %c : tensor<bf16>
  }) : (tensor<2x8x8x8x2xbf16>, tensor<2x4x4x4x2xbf16>, tensor<bf16>) -> tensor<2x8x8x8x2xbf16>
  %r = stablehlo.slice %s [0:2, 0:8, 0:8, 0:8, 0:2] : (tensor<2x8x8x8x2xbf16>) -> tensor<2x8x8x8x2xbf16>
  return %r : tensor<2x8x8x8x2xbf16>
}

// -----

// A neutral call left by an earlier run is bound to the gpu binding, whatever
// the strategy (binding it is what the call asks for).

// CHECK-LABEL: func.func @neutral_call_bound_to_gpu
// CHECK-NOT: @pool3d.
// CHECK: name = "pool3d_gpu_select"
// CHECK: name = "pool3d_gpu_gather"
// CHECK-NOT: @pool3d.
// AUTO-LABEL: func.func @neutral_call_bound_to_gpu
// AUTO-NOT: @pool3d.
// AUTO: name = "pool3d_gpu_gather"
// AUTO-NOT: @pool3d.
func.func @neutral_call_bound_to_gpu(%g: tensor<1x2x2x2x2xf16>, %x: tensor<1x2x4x4x4xf16>, %y: tensor<1x2x2x2x2xf16>) -> tensor<1x2x4x4x4xf16> {
  %dx = stablehlo.custom_call @pool3d.max_pooling_3d_backward(%g, %x, %y) {api_version = 4 : i32, backend_config = {data_format = "NCDHW", kernel_size = dense<2> : tensor<3xi64>, output_format = "NCDHW", padding = dense<0> : tensor<3xi64>, stride = dense<2> : tensor<3xi64>}} : (tensor<1x2x2x2x2xf16>, tensor<1x2x4x4x4xf16>, tensor<1x2x2x2x2xf16>) -> tensor<1x2x4x4x4xf16>
  return %dx : tensor<1x2x4x4x4xf16>
}

// -----

// Refused by the gpu binding: a neutral call on f64 stays as it is.

// CHECK-LABEL: func.func @neutral_call_f64_refused
// CHECK-NOT: __gpu$xla.gpu.triton
// CHECK: stablehlo.custom_call @pool3d.max_pooling_3d_backward_from_input(
// CHECK-NOT: __gpu$xla.gpu.triton
// AUTO-LABEL: func.func @neutral_call_f64_refused
// AUTO-NOT: __gpu$xla.gpu.triton
// AUTO: stablehlo.custom_call @pool3d.max_pooling_3d_backward_from_input(
// AUTO-NOT: __gpu$xla.gpu.triton
// REMARK: pool3d-max-pool-backward-gpu.mlir:[[# @LINE + 3]]:9: remark: neutral call not rewritten: gpu binding: the gpu kernels take f32, bf16, f16, not f64
// AUTO-REMARK: pool3d-max-pool-backward-gpu.mlir:[[# @LINE + 2]]:9: remark: neutral call not rewritten: gpu binding: the gpu kernels take f32, bf16, f16, not f64
func.func @neutral_call_f64_refused(%g: tensor<1x2x2x2x2xf64>, %x: tensor<1x2x4x4x4xf64>) -> tensor<1x2x4x4x4xf64> {
  %dx = stablehlo.custom_call @pool3d.max_pooling_3d_backward_from_input(%g, %x) {api_version = 4 : i32, backend_config = {data_format = "NCDHW", kernel_size = dense<2> : tensor<3xi64>, output_format = "NCDHW", padding = dense<0> : tensor<3xi64>, stride = dense<2> : tensor<3xi64>}} : (tensor<1x2x2x2x2xf64>, tensor<1x2x4x4x4xf64>) -> tensor<1x2x4x4x4xf64>
  return %dx : tensor<1x2x4x4x4xf64>
}

// -----

// Refused by the gpu binding (the contract's window limit, 4096 taps): a
// neutral call with a 17x17x17 window stays as it is.

// CHECK-LABEL: func.func @neutral_call_window_over_4096_refused
// CHECK-NOT: __gpu$xla.gpu.triton
// CHECK: stablehlo.custom_call @pool3d.max_pooling_3d_backward_from_input(
// CHECK-NOT: __gpu$xla.gpu.triton
// AUTO-LABEL: func.func @neutral_call_window_over_4096_refused
// AUTO-NOT: __gpu$xla.gpu.triton
// AUTO: stablehlo.custom_call @pool3d.max_pooling_3d_backward_from_input(
// AUTO-NOT: __gpu$xla.gpu.triton
// REMARK: pool3d-max-pool-backward-gpu.mlir:[[# @LINE + 2]]:9: remark: neutral call not rewritten: gpu binding: prod(kernel_size) = 4913 > 4096
func.func @neutral_call_window_over_4096_refused(%g: tensor<1x1x1x1x1xf32>, %x: tensor<1x1x17x17x17xf32>) -> tensor<1x1x17x17x17xf32> {
  %dx = stablehlo.custom_call @pool3d.max_pooling_3d_backward_from_input(%g, %x) {api_version = 4 : i32, backend_config = {data_format = "NCDHW", kernel_size = dense<17> : tensor<3xi64>, output_format = "NCDHW", padding = dense<0> : tensor<3xi64>, stride = dense<1> : tensor<3xi64>}} : (tensor<1x1x1x1x1xf32>, tensor<1x1x17x17x17xf32>) -> tensor<1x1x17x17x17xf32>
  return %dx : tensor<1x1x17x17x17xf32>
}
