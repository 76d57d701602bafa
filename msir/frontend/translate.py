"""Python AST to the `msir` dialect.

`Translator` walks one function's AST and builds the body of a `func.func`,
keeping every value in SSA form. Shapes and dtypes are known while tracing
(the function is specialised to its argument types), so NumPy broadcasting and
type promotion become explicit `msir.broadcast_to` and `msir.cast` ops here, and
every shape or dtype mistake is reported at the user's source line.

The translator is composed of one mixin per concern, each in its own module
over the shared core (`msir.frontend.base.TranslatorBase`):

| module | translates |
| --- | --- |
| `statements` | statement lists, assignments, refused statements |
| `expressions` | operators, comparisons, boolean logic, comprehensions |
| `names` | variables, values of enclosing scopes, captured arrays |
| `attributes` | `value.attr` of arrays, modules, dtypes |
| `objects` | plain Python objects and dicts: attributes, items, methods |
| `subscripts` | `value[index]` of tuples, lists, dicts, arrays |
| `array_ops` | reductions and shape operations |
| `calls` | calls: inlined, outlined as `func.call`, library functions |
| `recursion` | native recursive calls and their result types |
| `control_flow` | `if`, `for`, `while`, early returns |
| `differentiation` | `msir.grad` and the other transforms in compiled code |
| `user_errors` | `assert`, `raise` and f-string messages as runtime checks (`msir.check`) |

with `numpy_handlers` (the table of NumPy functions, builtins and array
methods), `state` (the trace's shared state and compile-time values),
`structure` (values as structures of runtime leaves) and `rewrites` (AST
analyses and rewrites for control flow) beside them. This module composes
`Translator` and keeps the frontend's entry points importable from one place.
"""

from __future__ import annotations

from msir.frontend.array_ops import ArrayOpsMixin
from msir.frontend.attributes import AttributesMixin
from msir.frontend.base import TranslatorBase, flatten_result
from msir.frontend.calls import CallsMixin, _closure_env
from msir.frontend.control_flow import ControlFlowMixin
from msir.frontend.differentiation import DifferentiationMixin
from msir.frontend.expressions import ExpressionsMixin
from msir.frontend.names import NamesMixin
from msir.frontend.objects import ObjectsMixin
from msir.frontend.recursion import RecursionMixin
from msir.frontend.state import Capture, TraceContext
from msir.frontend.statements import StatementsMixin
from msir.frontend.subscripts import SubscriptsMixin
from msir.frontend.user_errors import UserErrorsMixin

__all__ = ["Capture", "TraceContext", "Translator", "_closure_env", "build_function", "flatten_result"]


class Translator(
    StatementsMixin,
    ExpressionsMixin,
    NamesMixin,
    AttributesMixin,
    ObjectsMixin,
    SubscriptsMixin,
    ArrayOpsMixin,
    CallsMixin,
    RecursionMixin,
    ControlFlowMixin,
    DifferentiationMixin,
    UserErrorsMixin,
    TranslatorBase,
):
    """Translates one Python function body into ops appended to `block`."""


build_function = Translator.build_function
