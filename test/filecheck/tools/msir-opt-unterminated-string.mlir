// RUN: not msir-opt %s 2>&1 | filecheck %s
// RUN: not msir-run %s --entry f 2>&1 | filecheck %s

// A string literal that does not close is rejected at its quote, in well
// under a second: xDSL's lexer would backtrack through it for minutes.
// "a quote in a comment is no string

func.func @f() {
  "test.op"() {a = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa} : () -> ()
  func.return
}

// CHECK-NOT:  Traceback
// CHECK:      {{^}}{{.*}}msir-opt-unterminated-string.mlir:9:20: error: unterminated string literal{{$}}
// CHECK-NEXT: {{^}}  "test.op"() {a = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa} : () -> (){{$}}
// CHECK-NEXT: {{^}}                   ^{{$}}
