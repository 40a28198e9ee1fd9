"""Print the Python SDK's models as JSON, for api's wire test (wire_test.go).

For each module named on the command line: every class, with its type
parameters (Generic[T]) and its fields and their annotations as written: a
dataclass's annotated class attributes, or else its __init__ parameters
(the Problem exception). The modules are parsed, not imported, so nothing
beyond the standard library is needed.
"""

import ast
import json
import sys


def is_dataclass(node: ast.ClassDef) -> bool:
    for d in node.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if isinstance(target, ast.Name) and target.id == "dataclass":
            return True
    return False


def fields_of(node: ast.ClassDef, dataclass: bool) -> list:
    if dataclass:
        return [
            {"name": st.target.id, "type": ast.unparse(st.annotation)}
            for st in node.body
            if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)
            and not ast.unparse(st.annotation).startswith("ClassVar")
        ]
    for st in node.body:
        if isinstance(st, ast.FunctionDef) and st.name == "__init__":
            params = st.args.posonlyargs + st.args.args[1:] + st.args.kwonlyargs
            return [{"name": a.arg, "type": ast.unparse(a.annotation) if a.annotation else "Any"} for a in params]
    return []


def main() -> None:
    out = {}
    for path in sys.argv[1:]:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            dataclass = is_dataclass(node)
            params = [
                ast.unparse(b.slice) for b in node.bases
                if isinstance(b, ast.Subscript) and ast.unparse(b.value) == "Generic"
            ]
            out[node.name] = {"module": path, "dataclass": dataclass, "params": params,
                              "fields": fields_of(node, dataclass)}
    json.dump(out, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
