// RUN: msir-opt %s -p msir-fuse --emit-dot | filecheck %s
// RUN: msir-opt %s -p msir-fuse --emit-dot --dot-max-region-ops 2 | filecheck %s --check-prefix=COLLAPSED

// --emit-dot draws the result as a Graphviz graph: a cluster per function
// (the adjoint told apart by its name), a cluster per fusion group holding
// its ops, a cluster per loop with its header, block arguments and body, and
// an edge per SSA use.

func.func @f__bwd(%x: tensor<8xf32>, %n: tensor<i64>) -> tensor<8xf32> {
  %c0 = msir.constant dense<0> : tensor<i64>
  %c1 = msir.constant dense<1> : tensor<i64>
  %0 = msir.for %c0 to %n step %c1 (%x) : (tensor<8xf32>) {
  ^bb0(%i: tensor<i64>, %acc: tensor<8xf32>):
    %1 = msir.exp %acc : tensor<8xf32>
    %2 = msir.mul %1, %acc : tensor<8xf32>
    %3 = msir.sin %2 : tensor<8xf32>
    msir.yield %3 : tensor<8xf32>
  }
  func.return %0 : tensor<8xf32>
}

// CHECK:      digraph msir {
// CHECK:        subgraph cluster_[[F:f[0-9]+]] {
// CHECK-NEXT:     label="@f__bwd  (adjoint)";
// CHECK-NEXT:     [[X:n[0-9]+]] [label="arg 0\n8xf32", {{.*}}shape=ellipse];
// CHECK-NEXT:     [[N:n[0-9]+]] [label="arg 1\ni64", {{.*}}shape=ellipse];
// CHECK-NEXT:     [[C0:n[0-9]+]] [label="0", {{.*}}shape=plaintext
// CHECK-NEXT:     [[C1:n[0-9]+]] [label="1", {{.*}}shape=plaintext
// CHECK-NEXT:     subgraph cluster_{{r[0-9]+}} {
// CHECK-NEXT:       label="for";
// CHECK-NEXT:       [[FOR:n[0-9]+]] [label="for\n8xf32", fillcolor="#ffd8a8", shape=box];
// CHECK-NEXT:       [[I:n[0-9]+]] [label="arg 0\ni64", {{.*}}shape=ellipse
// CHECK-NEXT:       [[ACC:n[0-9]+]] [label="arg 1\n8xf32", {{.*}}shape=ellipse
// CHECK-NEXT:       subgraph cluster_{{g[0-9]+}} {
// CHECK-NEXT:         label="fusion";
// CHECK-NEXT:         [[EXP:n[0-9]+]] [label="exp\n8xf32"
// CHECK-NEXT:         [[MUL:n[0-9]+]] [label="mul\n8xf32"
// CHECK-NEXT:         [[SIN:n[0-9]+]] [label="sin\n8xf32"
// CHECK-NEXT:       }
// CHECK-NEXT:     }
// CHECK-NEXT:     [[RET:n[0-9]+]] [label="return"
// CHECK-NEXT:   }
// CHECK-DAG:    [[C0]] -> [[FOR]];
// CHECK-DAG:    [[N]] -> [[FOR]];
// CHECK-DAG:    [[C1]] -> [[FOR]];
// CHECK-DAG:    [[X]] -> [[FOR]];
// CHECK-DAG:    [[FOR]] -> [[ACC]] [style=dotted, arrowhead=none];
// CHECK-DAG:    [[ACC]] -> [[EXP]];
// CHECK-DAG:    [[EXP]] -> [[MUL]];
// CHECK-DAG:    [[ACC]] -> [[MUL]];
// CHECK-DAG:    [[MUL]] -> [[SIN]];
// CHECK-DAG:    [[SIN]] -> [[FOR]] [style=dashed, constraint=false
// CHECK-DAG:    [[FOR]] -> [[RET]];
// CHECK:      }

// COLLAPSED:     label="for, 4 ops\n8xf32"
// COLLAPSED-NOT: label="exp
