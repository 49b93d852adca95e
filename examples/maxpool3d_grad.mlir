module @jit_loss attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x3x8x8x8xf32>) -> (tensor<2x3x8x8x8xf32> {jax.result_info = "result"}) {
    %0 = call @relu(%arg0) : (tensor<2x3x8x8x8xf32>) -> tensor<2x3x8x8x8xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x3x8x8x8xf32>
    %2 = stablehlo.compare GT, %arg0, %1, FLOAT : (tensor<2x3x8x8x8xf32>, tensor<2x3x8x8x8xf32>) -> tensor<2x3x8x8x8xi1>
    %cst_0 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %3 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<f32>
    %4 = "stablehlo.reduce_window"(%0, %3) <{base_dilations = array<i64: 1, 1, 1, 1, 1>, padding = dense<[[0, 0], [0, 0], [1, 1], [1, 1], [1, 1]]> : tensor<5x2xi64>, window_dilations = array<i64: 1, 1, 1, 1, 1>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
    ^bb0(%arg1: tensor<f32>, %arg2: tensor<f32>):
      %14 = stablehlo.maximum %arg1, %arg2 : tensor<f32>
      stablehlo.return %14 : tensor<f32>
    }) : (tensor<2x3x8x8x8xf32>, tensor<f32>) -> tensor<2x3x4x4x4xf32>
    %cst_1 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %5 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<2x3x4x4x4xf32>
    %6 = stablehlo.multiply %5, %4 : tensor<2x3x4x4x4xf32>
    %cst_2 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %7 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<2x3x4x4x4xf32>
    %8 = stablehlo.multiply %7, %6 : tensor<2x3x4x4x4xf32>
    %cst_3 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %9 = stablehlo.pad %0, %cst_3, low = [0, 0, 1, 1, 1], high = [0, 0, 1, 1, 1], interior = [0, 0, 0, 0, 0] : (tensor<2x3x8x8x8xf32>, tensor<f32>) -> tensor<2x3x10x10x10xf32>
    %cst_4 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %10 = "stablehlo.select_and_scatter"(%9, %8, %cst_4) <{padding = dense<0> : tensor<5x2xi64>, window_dimensions = array<i64: 1, 1, 3, 3, 3>, window_strides = array<i64: 1, 1, 2, 2, 2>}> ({
    ^bb0(%arg1: tensor<f32>, %arg2: tensor<f32>):
      %14 = stablehlo.compare GE, %arg1, %arg2, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %14 : tensor<i1>
    }, {
    ^bb0(%arg1: tensor<f32>, %arg2: tensor<f32>):
      %14 = stablehlo.add %arg1, %arg2 : tensor<f32>
      stablehlo.return %14 : tensor<f32>
    }) : (tensor<2x3x10x10x10xf32>, tensor<2x3x4x4x4xf32>, tensor<f32>) -> tensor<2x3x10x10x10xf32>
    %11 = stablehlo.slice %10 [0:2, 0:3, 1:9, 1:9, 1:9] : (tensor<2x3x10x10x10xf32>) -> tensor<2x3x8x8x8xf32>
    %cst_5 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %12 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<f32>) -> tensor<2x3x8x8x8xf32>
    %13 = stablehlo.select %2, %11, %12 : tensor<2x3x8x8x8xi1>, tensor<2x3x8x8x8xf32>
    return %13 : tensor<2x3x8x8x8xf32>
  }
  func.func private @relu(%arg0: tensor<2x3x8x8x8xf32>) -> tensor<2x3x8x8x8xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x3x8x8x8xf32>
    %1 = stablehlo.maximum %arg0, %0 : tensor<2x3x8x8x8xf32>
    return %1 : tensor<2x3x8x8x8xf32>
  }
}

