// RUN: pool3d-opt %s --split-input-file --strategy=indices | FileCheck %s
// RUN: pool3d-opt %s --split-input-file --strategy=indices --remarks 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK

// Inside a partially manual jax.shard_map (axis_names= a subset of the mesh)
// JAX wraps nearly every value in an open sdy.sharding_constraint ({?} on
// every dimension, [] on a scalar): between the -inf pad and the
// select_and_scatter, after it, and in the scatter region. They constrain
// nothing; the pass looks through them, and those around the replaced
// pad / select_and_scatter / slice go with them.

// -----

// CHECK-LABEL: func.func @partially_manual_gradient_through_open_constraints
// CHECK: sdy.manual_computation
// CHECK-SAME: manual_axes={"b"} (%[[X:[a-z0-9_]+]]: tensor<1x2x8x8x8xf32>, %{{[a-z0-9_]+}}: tensor<1x2x4x4x4xf32>) {
// CHECK: %[[G:.*]] = sdy.sharding_constraint %{{.*}} <@mesh, [{?}, {?}, {?}, {?}, {?}]> : tensor<1x2x4x4x4xf32>
// CHECK-NOT: stablehlo.pad
// CHECK: %[[DX:.*]] = stablehlo.custom_call @pool3d.max_pooling_3d_backward_from_input(%[[G]], %[[X]])
// CHECK-SAME: (tensor<1x2x4x4x4xf32>, tensor<1x2x8x8x8xf32>) -> tensor<1x2x8x8x8xf32>
// CHECK-NOT: stablehlo.select_and_scatter
// CHECK-NOT: stablehlo.slice
// CHECK: %[[OUT:.*]] = sdy.sharding_constraint %[[DX]] <@mesh, [{?}, {?}, {?}, {?}, {?}]> : tensor<1x2x8x8x8xf32>
// CHECK-NEXT: sdy.return %[[OUT]]
// REMARK: pool3d-max-pool-backward-shard-map.mlir:[[# @LINE + 10]]:12: remark: max-pool gradient rewritten: NCDHW kernel_size=[3, 3, 3] stride=[2, 2, 2] padding=[1, 1, 1], f32, indices strategy: no forward max-pool before it in its block, one fused call from the input
module @jit_grad attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["b"=2, "m"=2]>
  func.func @partially_manual_gradient_through_open_constraints(%arg0: tensor<2x2x8x8x8xf32>, %arg9: tensor<2x2x4x4x4xf32>) -> tensor<2x2x8x8x8xf32> {
    %0 = sdy.manual_computation(%arg0, %arg9) in_shardings=[<@mesh, [{"b", ?}, {?}, {?}, {?}, {?}]>, <@mesh, [{"b", ?}, {?}, {?}, {?}, {?}]>] out_shardings=[<@mesh, [{"b", ?}, {?}, {?}, {?}, {?}]>] manual_axes={"b"} (%arg1: tensor<1x2x8x8x8xf32>, %arg8: tensor<1x2x4x4x4xf32>) {
      %2 = sdy.sharding_constraint %arg8 <@mesh, [{?}, {?}, {?}, {?}, {?}]> : tensor<1x2x4x4x4xf32>
      %cst_0 = stablehlo.constant dense<0xFF800000> : tensor<f32>
      %3 = stablehlo.pad %arg1, %cst_0, low = [0, 0, 1, 1, 1], high = [0, 0, 1, 1, 1], interior = [0, 0, 0, 0, 0] : (tensor<1x2x8x8x8xf32>, tensor<f32>) -> tensor<1x2x10x10x10xf32>
      %4 = sdy.sharding_constraint %3 <@mesh, [{?}, {?}, {?}, {?}, {?}]> : tensor<1x2x10x10x10xf32>
      %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %5 = "stablehlo.select_and_scatter"(%4, %2, %cst_1) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
      ^bb0(%arg2: tensor<f32>, %arg3: tensor<f32>):
        %9 = stablehlo.compare GE, %arg2, %arg3, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
        stablehlo.return %9 : tensor<i1>
      }, {
      ^bb0(%arg2: tensor<f32>, %arg3: tensor<f32>):
        %9 = stablehlo.add %arg2, %arg3 : tensor<f32>
        %10 = sdy.sharding_constraint %9 <@mesh, []> : tensor<f32>
        stablehlo.return %10 : tensor<f32>
      }) : (tensor<1x2x10x10x10xf32>, tensor<1x2x4x4x4xf32>, tensor<f32>) -> tensor<1x2x10x10x10xf32>
      %6 = sdy.sharding_constraint %5 <@mesh, [{?}, {?}, {?}, {?}, {?}]> : tensor<1x2x10x10x10xf32>
      %7 = stablehlo.slice %6 [0:1, 0:2, 1:9, 1:9, 1:9] : (tensor<1x2x10x10x10xf32>) -> tensor<1x2x8x8x8xf32>
      %8 = sdy.sharding_constraint %7 <@mesh, [{?}, {?}, {?}, {?}, {?}]> : tensor<1x2x8x8x8xf32>
      sdy.return %8 : tensor<1x2x8x8x8xf32>
    } : (tensor<2x2x8x8x8xf32>, tensor<2x2x4x4x4xf32>) -> tensor<2x2x8x8x8xf32>
    return %0 : tensor<2x2x8x8x8xf32>
  }
}

// -----

// A constraint that shards a dimension ({"m"}) is not looked through: the
// select_and_scatter's operand is then the constrained value, pooled as it is
// (attribute form, no padding: exact), and the pad, the constraint and the
// slice stay.

// CHECK-LABEL: func.func @sharding_constraint_is_not_looked_through
// CHECK: %[[P:.*]] = stablehlo.pad
// CHECK: %[[C:.*]] = sdy.sharding_constraint %[[P]] <@mesh, [{?}, {"m"}, {?}, {?}, {?}]>
// CHECK: stablehlo.custom_call @pool3d.max_pooling_3d_backward_from_input(%{{.*}}, %[[C]])
// CHECK-SAME: -> tensor<1x2x10x10x10xf32>
// CHECK: stablehlo.slice
// CHECK-NOT: stablehlo.select_and_scatter
module @jit_grad_m attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["b"=2, "m"=2]>
  func.func @sharding_constraint_is_not_looked_through(%arg0: tensor<2x2x8x8x8xf32>, %arg9: tensor<2x2x4x4x4xf32>) -> tensor<2x2x8x8x8xf32> {
    %0 = sdy.manual_computation(%arg0, %arg9) in_shardings=[<@mesh, [{"b", ?}, {?}, {?}, {?}, {?}]>, <@mesh, [{"b", ?}, {?}, {?}, {?}, {?}]>] out_shardings=[<@mesh, [{"b", ?}, {?}, {?}, {?}, {?}]>] manual_axes={"b"} (%arg1: tensor<1x2x8x8x8xf32>, %arg8: tensor<1x2x4x4x4xf32>) {
      %cst_0 = stablehlo.constant dense<0xFF800000> : tensor<f32>
      %3 = stablehlo.pad %arg1, %cst_0, low = [0, 0, 1, 1, 1], high = [0, 0, 1, 1, 1], interior = [0, 0, 0, 0, 0] : (tensor<1x2x8x8x8xf32>, tensor<f32>) -> tensor<1x2x10x10x10xf32>
      %4 = sdy.sharding_constraint %3 <@mesh, [{?}, {"m"}, {?}, {?}, {?}]> : tensor<1x2x10x10x10xf32>
      %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %5 = "stablehlo.select_and_scatter"(%4, %arg8, %cst_1) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
      ^bb0(%arg2: tensor<f32>, %arg3: tensor<f32>):
        %9 = stablehlo.compare GE, %arg2, %arg3, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
        stablehlo.return %9 : tensor<i1>
      }, {
      ^bb0(%arg2: tensor<f32>, %arg3: tensor<f32>):
        %9 = stablehlo.add %arg2, %arg3 : tensor<f32>
        stablehlo.return %9 : tensor<f32>
      }) : (tensor<1x2x10x10x10xf32>, tensor<1x2x4x4x4xf32>, tensor<f32>) -> tensor<1x2x10x10x10xf32>
      %7 = stablehlo.slice %5 [0:1, 0:2, 1:9, 1:9, 1:9] : (tensor<1x2x10x10x10xf32>) -> tensor<1x2x8x8x8xf32>
      sdy.return %7 : tensor<1x2x8x8x8xf32>
    } : (tensor<2x2x8x8x8xf32>, tensor<2x2x4x4x4xf32>) -> tensor<2x2x8x8x8xf32>
    return %0 : tensor<2x2x8x8x8xf32>
  }
}
