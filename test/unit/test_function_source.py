"""`msir.frontend.source.get_source` reads a `def` from its file's lines without
Python's tokenizer (`_parse_def_lines`); it must give the same tree, line
numbers and columns included, as `inspect.getsourcelines`' route
(`_parse_lines`), and fall back to that route where it cannot."""

import ast
import copy
import importlib
import inspect
import textwrap
import types

import pytest

from msir.frontend import source

# Modules with many functions of every shape: decorated, nested, methods,
# multi-line statements and strings, code after a return.
MODULES = ["msir.frontend.source", "msir.frontend.driver", "msir.frontend.expressions", "msir.api",
           "msir.passes.fuse", "msir.lowering.blas", "msir.lowering.to_loops", "msir.nn.layers"]


def _functions(module):
    seen = set()
    stack = list(vars(module).values())
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, type) and obj.__module__ == module.__name__:
            stack.extend(vars(obj).values())
        elif isinstance(obj, (staticmethod, classmethod)):
            stack.append(obj.__func__)
        elif isinstance(obj, property):
            stack.extend(f for f in (obj.fget, obj.fset) if f is not None)
        elif isinstance(obj, types.FunctionType) and obj.__code__.co_filename == module.__file__:
            yield obj  # (not the methods dataclasses generate with exec)
            # nested functions, from their code objects
            for c in obj.__code__.co_consts:
                if inspect.iscode(c) and not c.co_name.startswith("<"):
                    cells = tuple(types.CellType() for _ in c.co_freevars)
                    yield types.FunctionType(c, obj.__globals__, None, None, cells)


def _inspect_route(fn):
    lines, first = inspect.getsourcelines(fn)
    return source._find_definition(source._parse_lines(fn, lines, first), fn)


def _dump(node):
    """The tree with its positions; the text of multi-line strings left out: inspect's
    route dedents the source, and with it the continuation lines of an indented
    function's strings (the fast route keeps them as written)."""
    node = copy.deepcopy(node)
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and "\n" in n.value:
            n.value = "<multi-line string>"
    return ast.dump(node, include_attributes=True)


@pytest.mark.parametrize("name", MODULES)
def test_the_fast_route_gives_inspects_tree(name):
    module = importlib.import_module(name)
    checked = 0
    for fn in _functions(module):
        tree = source._parse_def_lines(fn.__code__)
        assert tree is not None, fn.__qualname__
        fast = source._find_definition(tree, fn)
        assert fast is not None, fn.__qualname__
        assert _dump(fast) == _dump(_inspect_route(fn)), fn.__qualname__
        checked += 1
    assert checked >= 5


def _from_file(tmp_path, text, name):
    path = tmp_path / f"mod_{name}.py"
    path.write_text(textwrap.dedent(text))
    spec = importlib.util.spec_from_file_location(f"mod_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_code_after_a_return_is_kept(tmp_path):
    mod = _from_file(tmp_path, '''
        def f(x):
            return x

            y = x + 1  # dropped by the compiler, kept in the tree
            # a comment

        def g(x):
            return x
        ''', "after_return")
    node = source.get_source(mod.f).node
    assert [type(s).__name__ for s in node.body] == ["Return", "Assign"]
    assert node.body[1].lineno == 5 and node.end_lineno == 5
    assert _dump(node) == _dump(_inspect_route(mod.f))


def test_methods_decorators_and_multiline_statements(tmp_path):
    mod = _from_file(tmp_path, '''
        import functools

        class C:
            @staticmethod
            @functools.lru_cache
            def f(x):
                s = """a
        string at column 0"""
                return (x +
                        len(s))

            def g(self):
                "only a docstring"
        ''', "methods")
    f = mod.C.f.__wrapped__
    node = source.get_source(f).node
    assert (node.lineno, node.col_offset, node.end_lineno) == (7, 4, 11)
    assert node.body[0].value.value == "a\nstring at column 0"
    # inspect's route cannot read it: its dedent fails on the string's column-0 line
    with pytest.raises(Exception, match="do not parse"):
        _inspect_route(f)
    # a docstring has no instruction: the lines after the def's are indented deeper
    assert source._parse_def_lines(mod.C.g.__code__) is not None
    assert _dump(source.get_source(mod.C.g).node) == _dump(_inspect_route(mod.C.g))


def test_a_function_without_source_lines_still_says_why(tmp_path):
    namespace = {}
    exec("def h(x):\n    return x\n", namespace)  # noqa: S102
    assert source._parse_def_lines(namespace["h"].__code__) is None
    with pytest.raises(Exception, match="cannot read the source of function 'h'"):
        source.get_source(namespace["h"])
