# RUN: msir-opt %s --entry loss --args 'tensor<2x3xf32>,tensor<3x4xf32>' | filecheck %s --check-prefix=FRONT
# RUN: msir-opt %s --entry step --args 'tensor<2x3xf32>,tensor<3x4xf32>' -p msir-grad | filecheck %s --check-prefix=GRAD
# RUN: msir-opt %s --entry step --args 'tensor<2x3xf32>,tensor<3x4xf32>' -p msir-grad,dce,msir-inline,msir-fuse | filecheck %s --check-prefix=FUSE

# msir.ops calls name every op they emit (`name=` -> `msir.name`); a softmax is
# its primitive ops, all carrying its name. msir-grad keeps the names in the
# augmented forward and names the adjoint ops of a named op "<name>/grad";
# inlining and fusion bodies keep them.

import msir
from msir import ops


def loss(x, w):
    return ops.reduce_sum(ops.softmax(ops.matmul(x, w, name="fc1"), name="sm"), name="total")


def step(x, w):
    return msir.grad(loss, argnums=1)(x, w)


# FRONT:      func.func @loss(%x: tensor<2x3xf32>, %w: tensor<3x4xf32>) -> tensor<f32> {
# FRONT-NEXT:   msir.matmul %x, %w {msir.name = "fc1"} : tensor<2x3xf32>, tensor<3x4xf32> to tensor<2x4xf32>
# FRONT-NEXT:   msir.reduce_max %{{.*}} axes array<i64: 1> {msir.name = "sm"}
# FRONT-NEXT:   msir.stop_gradient %{{.*}} {msir.name = "sm"}
# FRONT-NEXT:   msir.broadcast_to %{{.*}} {msir.name = "sm"}
# FRONT-NEXT:   msir.sub %{{.*}}, %{{.*}} {msir.name = "sm"}
# FRONT-NEXT:   msir.exp %{{.*}} {msir.name = "sm"}
# FRONT-NEXT:   msir.reduce_sum %{{.*}} axes array<i64: 1> {msir.name = "sm"}
# FRONT-NEXT:   msir.broadcast_to %{{.*}} {msir.name = "sm"}
# FRONT-NEXT:   msir.div %{{.*}}, %{{.*}} {msir.name = "sm"}
# FRONT-NEXT:   msir.reduce_sum %{{.*}} axes array<i64: 0, 1> {msir.name = "total"} : tensor<2x4xf32> to tensor<f32>
# FRONT-NEXT:   func.return

# GRAD-LABEL: func.func private @loss__fwd(
# GRAD:         msir.matmul %{{.*}}, %{{.*}} {msir.name = "fc1"}
# GRAD:         msir.exp %{{.*}} {msir.name = "sm"}
# GRAD:         msir.reduce_sum %{{.*}} axes array<i64: 0, 1> {msir.name = "total"}
# GRAD:         func.return
# GRAD-LABEL: func.func private @loss__bwd(
# GRAD-NEXT:    msir.broadcast_to %{{.*}} {msir.name = "total/grad"} : tensor<f32> to tensor<2x4xf32>
# GRAD-NEXT:    msir.div %{{.*}}, %{{.*}} {msir.name = "sm/grad"}
# GRAD:         msir.reduce_sum %{{.*}} axes array<i64: 1> {msir.name = "sm/grad"}
# GRAD:         msir.transpose %{{.*}}, array<i64: 1, 0> {msir.name = "fc1/grad"}
# GRAD-NEXT:    msir.matmul %{{.*}}, %{{.*}} {msir.name = "fc1/grad"} : tensor<3x2xf32>, tensor<2x4xf32> to tensor<3x4xf32>
# GRAD-NEXT:    func.return

# FUSE-LABEL: func.func @step(
# FUSE:         msir.matmul %x, %w {msir.name = "fc1"}
# FUSE:         msir.fusion
# FUSE:           msir.sub %{{.*}}, %{{.*}} {msir.name = "sm"}
# FUSE-NEXT:      msir.exp %{{.*}} {msir.name = "sm"}
# FUSE-NEXT:      msir.yield
# FUSE:         msir.fusion
# FUSE:           msir.div %{{.*}}, %{{.*}} {msir.name = "sm/grad"}
# FUSE:         msir.matmul %{{.*}}, %{{.*}} {msir.name = "fc1/grad"}
# FUSE-NEXT:    func.return
