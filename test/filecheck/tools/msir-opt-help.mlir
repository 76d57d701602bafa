// RUN: msir-opt --help | filecheck %s

// `msir-opt --help` ends with msir's passes, each with the summary of its
// docstring, in the registry's order (msir.pipeline.PASSES), before xDSL's.

// CHECK:      -p PASSES, --passes PASSES
// CHECK-NEXT: Available passes are: msir-{{$}}
// CHECK:      {{^}}msir passes:{{$}}
// CHECK-NEXT: {{^}}  msir-grad               Reverse-mode differentiation.{{$}}
// CHECK-NEXT: {{^}}  msir-jvp                Forward-mode differentiation.{{$}}
// CHECK-NEXT: {{^}}  msir-grad-jvp           Expand every differentiation op, reverse and forward mode, innermost first.{{$}}
// CHECK-NEXT: {{^}}  msir-specialize         Direct calls
// CHECK-NEXT: {{^}}  msir-symbol-dce         Erase the private functions
// CHECK-NEXT: {{^}}  msir-forward-arguments  Callers use
// CHECK-NEXT: {{^}}  msir-inline             Inline private
// CHECK-NEXT: {{^}}  msir-lower-einsum       Decompose `msir.einsum`
// CHECK-NEXT: {{^}}  msir-lower-windows      Decompose convolutions and poolings
// CHECK-NEXT: {{^}}  msir-fuse               Group elementwise chains
// CHECK-NEXT: {{^}}  msir-shard              Partition the functions whose ops carry strategies into per-device functions.{{$}}
// CHECK-NEXT: {{^}}  convert-msir-to-loops   Bufferise msir tensor code
// CHECK-NEXT: {{^}}  msir-lower-to-llvm      Lower a loops-level module
// CHECK-NEXT: {{^}}  convert-msir-to-ascend  msir functions to synchronised `ascend.kernel`s.{{$}}
// CHECK-EMPTY:
// CHECK-NEXT: {{^}}xDSL passes:{{$}}
// CHECK-NOT:  msir-
// CHECK:      canonicalize,
// CHECK-NOT:  msir-
