// RUN: not msir-opt %S/msir-grad-jvp.mlir -p msir-grad 2>&1 | filecheck %s

// msir-grad alone meets a forward-mode msir.jvp inside the function it
// differentiates (only msir-grad-jvp expands both modes): a clear error, not
// the internal assertion the IR fuzzer found.

// CHECK-NOT: internal error
// CHECK:     {{^}}error: msir-grad does not expand the forward-mode 'msir.jvp' inside the function it differentiates: run msir-grad-jvp, which expands both modes{{$}}
