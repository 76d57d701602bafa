# RUN: not msir-opt %s --entry bad --args 'tensor<3xf32>' 2>&1 | filecheck %s --check-prefix=ERR
# RUN: not msir-opt %s --entry bad_nested --args 'tensor<3xf32>' 2>&1 | filecheck %s --check-prefix=NESTED

# Unsupported syntax is reported at the user's source: file:line:col, the
# source line and a caret under the column; no Python traceback.


def bad(x):
    y = x * 2.0
    try:
        return y + 1.0
    except ValueError:
        return y


# ERR-NOT:   Traceback
# ERR:       {{.*}}unsupported-syntax.py:10:5: error: try/except is not supported in compiled functions
# ERR-NEXT:  {{^}}        try:{{$}}
# ERR-NEXT:  {{^}}        ^{{$}}
# ERR-NOT:   Traceback


def helper(t):
    if t.shape[0] > 1:
        try:
            t = t + 1.0
        finally:
            pass
    return t


def bad_nested(x):
    return helper(x) * 2.0


# The error inside an inlined or called function points at that function's line.
# NESTED-NOT:  Traceback
# NESTED:      {{.*}}unsupported-syntax.py:25:9: error: try/except is not supported in compiled functions
# NESTED-NEXT: {{^}}            try:{{$}}
# NESTED-NEXT: {{^}}            ^{{$}}
