"""InternalGraph: the recorded forward of one module for one argument structure — its
inputs, exprs in execution order and outputs — with the queries and edits MegEngine offers."""
from __future__ import annotations

import builtins
import keyword
import re
import weakref
from typing import Callable, Optional, Sequence

from .expr import (Apply, CallMethod, Expr, GetAttr, Input, is_call_function, is_call_module,
                   is_call_tensor_method)
from .filters import ExprFilter, NodeFilter
from .node import Node, TensorNode
from .pytree import LeafDef, is_leaf, tree_flatten
from . import surgery


def _is_builtin_name(name: str) -> bool:
    return name in builtins.__dict__ or name in keyword.kwlist or name in {"inf", "nan",
                                                                            "NoneType"}


class NameSpace:
    """The node names of one graph: unique, valid identifiers."""

    def __init__(self, name: str, qualname: str):
        self.name, self.qualname = name, qualname
        self.used_names: dict[str, Optional[object]] = {}

    def create_unique_name(self, name: str, node=None) -> str:
        if name in self.used_names and self.used_names[name] is node and node is not None:
            return name
        name = re.sub("[^0-9a-zA-Z_]+", "_", name) or "_"
        if name[0].isdigit():
            name = "_" + name
        while (self.used_names.get(name) is not None) or _is_builtin_name(name):
            match = re.match(r"(.*)_(\d+)$", name)
            name = name + "_1" if match is None else f"{match.group(1)}_{int(match.group(2)) + 1}"
        self.used_names.setdefault(name)
        if node is not None:
            self.used_names[name] = node
        return name

    def unassociate_name_with_obj(self, node) -> None:
        if self.used_names.get(node.name) is node:
            self.used_names[node.name] = None

    def auto_name(self, expr: Expr) -> None:
        """Name `expr`'s outputs after what made them (conv1_out, relu_out, add_out)."""
        suffix = "_out"
        if is_call_module(expr):
            name, qualname = expr.inputs[0].name, f"{expr.inputs[0].qualname}.[out]"
        elif is_call_tensor_method(expr):
            name = expr.method.strip("_")
            qualname = f"{self.qualname}.[{self.create_unique_name('method_' + name)}]"
        elif is_call_function(expr):
            name = expr.func.__name__
            qualname = f"{self.qualname}.[{self.create_unique_name('func_' + name)}]"
        elif isinstance(expr, Apply):
            name = str(expr.opdef).lower()
            qualname = f"{self.qualname}.[{self.create_unique_name('def_' + name)}]"
        elif isinstance(expr, GetAttr):
            qualname = f"{expr.inputs[0].qualname}.{expr.name}"
            name, suffix = expr.name, ""
        else:
            name = expr.name or "const_" + type(getattr(expr, "value", None)).__name__.lower()
            qualname, suffix = f"{self.qualname}.[{name}]", ""
        for node in expr.outputs:
            node._name = self.create_unique_name(node._name or name + suffix, node)
            if not node._qualname:
                node._qualname = qualname


class InternalGraph:
    """A module's forward for one argument structure. `inputs[0]` is the module itself
    (`self`), the other inputs its tensor arguments; `exprs()` / `nodes()` iterate the
    operations and values (recursively into called TracedModules by default)."""

    def __init__(self, name: str, qualname: str):
        self._name, self._qualname = name, qualname
        self._exprs: list[Expr] = []
        self._inputs: list[Node] = []
        self._outputs: list[Node] = []
        self._namespace = NameSpace(name, qualname)
        self._top_graph: Optional[weakref.ReferenceType] = None
        self._watch_point: list[Node] = []     # TracedModule.set_watch_points
        self._end_point: list[Node] = []       # TracedModule.set_end_points
        self._rst: dict[Node, object] = {}     # watched values of the last run

    # -- building -----------------------------------------------------------------------
    def _own(self, expr: Expr) -> None:
        expr._top_graph = weakref.ref(self)
        for n in expr.outputs:
            n._top_graph = weakref.ref(self)

    def _insert(self, expr: Expr, index: Optional[int] = None) -> None:
        self._own(expr)
        self._namespace.auto_name(expr)
        if not isinstance(expr, Input):
            self._exprs.append(expr) if index is None else self._exprs.insert(index, expr)

    def _adopt(self) -> None:
        """Make every expr and node point at this graph (after a copy)."""
        for node in self._inputs:
            if node.expr is not None:
                self._own(node.expr)
        for expr in self._exprs:
            self._own(expr)

    def _add_input(self, node: Node) -> None:
        self._inputs.append(node)

    def _add_output(self, node: Node) -> None:
        self._outputs.append(node)

    # -- properties ---------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, new_name: str) -> None:
        """Rename the graph (node names match as "<graph name>_<node name>"); in a called
        graph the name must be free in the caller's namespace."""
        owner = self._inputs[0].owner if self._inputs else None
        parent = self.top_graph
        if parent is None and owner is not None and not getattr(owner, "_is_top", True):
            raise AssertionError("The parent graph cannot be None.")
        if parent is not None:
            if parent._namespace.used_names.get(new_name) is not None:
                raise AssertionError(f"The name({new_name}) is already in use. Please try "
                                     "a different one again.")
            new_name = parent._namespace.create_unique_name(new_name, self)
        self._name = new_name

    @property
    def qualname(self) -> str:
        return self._qualname

    @property
    def inputs(self) -> list[Node]:
        return self._inputs

    @property
    def outputs(self) -> list[Node]:
        return self._outputs

    @property
    def top_graph(self):
        return self._top_graph() if self._top_graph is not None else None

    # -- queries ------------------------------------------------------------------------
    def _iter_exprs(self, recursive: bool, visited: Optional[set] = None):
        """The Input exprs, then the exprs in order; a called TracedModule's graph follows
        its call (the first time it is called)."""
        visited = set() if visited is None else visited
        seen_inputs = set()
        for node in self._inputs:
            if id(node) not in seen_inputs and node.expr is not None:
                seen_inputs.add(id(node))
                yield node.expr
        for expr in self._exprs:
            yield expr
            sub = expr.graph if recursive and isinstance(expr, CallMethod) else None
            if sub is not None and id(sub) not in visited:
                visited.add(id(sub))
                yield from sub._iter_exprs(True, visited)

    def _iter_nodes(self, recursive: bool):
        seen = set()
        for expr in self._iter_exprs(recursive):
            for node in expr.outputs:
                if id(node) not in seen:
                    seen.add(id(node))
                    yield node

    def exprs(self, recursive: bool = True) -> ExprFilter:
        return ExprFilter(lambda: self._iter_exprs(recursive))

    def nodes(self, recursive: bool = True) -> NodeFilter:
        return NodeFilter(lambda: self._iter_nodes(recursive))

    def get_function_by_type(self, func: Callable = None, recursive: bool = True):
        return self.exprs(recursive).call_function(func)

    def get_method_by_type(self, method: str = None, recursive: bool = True):
        return self.exprs(recursive).call_method(method)

    def get_expr_by_id(self, expr_id: Sequence[int] = None, recursive: bool = True):
        return self.exprs(recursive).expr_id(expr_id)

    def get_module_by_type(self, module_cls: type, recursive: bool = True):
        return self.nodes(recursive).type(module_cls)

    def get_node_by_id(self, node_id: Sequence[int] = None, recursive: bool = True):
        return self.nodes(recursive).node_id(node_id)

    def get_node_by_name(self, name: str = None, ignorecase: bool = True,
                         recursive: bool = True):
        return self.nodes(recursive).name(name, ignorecase)

    def get_dep_exprs(self, nodes: Sequence[Node]) -> list[Expr]:
        """The exprs `nodes` depend on, Input exprs included, in MegEngine's order: a
        depth-first walk from the last of `nodes` that takes the last-found input next."""
        if isinstance(nodes, Node):
            nodes = [nodes]
        found: list[Expr] = []
        seen_exprs: set[int] = set()
        pending, visited = list(nodes), set()
        while pending:
            node = pending.pop()
            visited.add(id(node))
            expr = node.expr
            if expr is None:
                continue
            if id(expr) not in seen_exprs:
                seen_exprs.add(id(expr))
                found.append(expr)
            for inp in expr.inputs:
                if id(inp) not in visited and all(inp is not p for p in pending):
                    pending.append(inp)
        return found

    # -- editing ------------------------------------------------------------------------
    def insert_exprs(self, expr: Optional[Expr] = None):
        """`with graph.insert_exprs(): out = F.relu(node)` records new exprs (after `expr`,
        or after the exprs making their inputs) instead of computing values."""
        if expr is not None and expr.top_graph is not self:
            raise AssertionError("Expr to insert after is not in graph.")
        return surgery.InsertExprs(self, expr)

    def replace_node(self, repl_dict: dict[Node, Node]) -> None:
        """Make every later reader (and the graph outputs) of `old` read `new` instead."""
        for node, repl in list(repl_dict.items()):
            if type(node) is not type(repl):
                raise AssertionError(f"The type of {node}({type(node).__name__}) and "
                                     f"{repl}({type(repl).__name__}) are not the same")
            if repl.top_graph is not self:
                raise AssertionError("the replacement node is not in this graph")
            self._outputs[:] = [repl if n is node else n for n in self._outputs]
            index = -1 if isinstance(repl.expr, Input) else self._exprs.index(repl.expr)
            deps = {id(e) for e in self.get_dep_exprs([repl])}
            for user in list(node.users):
                if user in self._exprs and self._exprs.index(user) <= index:
                    continue
                if id(user) in deps:
                    continue
                node.users.remove(user)
                repl.users.append(user)
                user.inputs[:] = [repl if n is node else n for n in user.inputs]

    def reset_outputs(self, outputs) -> None:
        """Make `outputs` (nodes, possibly nested) the graph's results."""
        leaves, out_def = tree_flatten(outputs, is_leaf=lambda x: isinstance(x, Node))
        self._outputs = list(leaves)
        owner = self._inputs[0].owner if self._inputs else None
        outdefs = getattr(owner, "argdef_outdef_map", None)
        if outdefs is not None:
            for key, graph in owner.argdef_graph_map.items():
                if graph is self:
                    outdefs[key] = out_def

    def add_input_node(self, shape: Sequence[int], dtype: str = "float32",
                       name: str = "args") -> TensorNode:
        """A new input of the top graph, after the positional arguments (its name made
        unique); calls then pass one more tensor."""
        owner = self._inputs[0].owner if self._inputs else None
        if owner is None or not getattr(owner, "_is_top", False):
            raise AssertionError("add_input_node only supports top graph")
        key = next(k for k, g in owner.argdef_graph_map.items() if g is self)
        name = self._namespace.create_unique_name(name)
        node = Input(TensorNode, name, f"{self._qualname}.[{name}]").outputs[0]
        node.shape, node.dtype = tuple(shape), dtype
        self._own(node.expr)
        self._namespace.used_names[name] = node
        nodes = iter(self._inputs)
        leaves = [next(nodes) if getattr(d, "kind", "const") != "const" else d.const_val
                  for d in _leaf_defs(key)]
        args, kwargs = key.unflatten(leaves)
        new_leaves, new_key = tree_flatten(
            ((*args, node), kwargs), is_leaf=lambda x: isinstance(x, Node) or is_leaf(x))
        self._inputs[:] = [x for x in new_leaves if isinstance(x, Node)]
        graphs, outdefs = owner.argdef_graph_map, owner.argdef_outdef_map
        graphs[new_key] = graphs._items.pop(key)
        outdefs[new_key] = outdefs._items.pop(key)
        return node

    def add_output_node(self, node: TensorNode) -> None:
        """Return `node` too (the result becomes a tuple)."""
        owner = self._inputs[0].owner if self._inputs else None
        self._outputs.append(node)
        if owner is not None:
            for key, graph in owner.argdef_graph_map.items():
                if graph is self:
                    old = owner.argdef_outdef_map[key]
                    current = old.unflatten(self._outputs[:-1])
                    current = (current, node) if not isinstance(current, tuple) else \
                        (*current, node)
                    owner.argdef_outdef_map[key] = tree_flatten(
                        current, is_leaf=lambda x: isinstance(x, Node))[1]

    def _merge_getattr_expr(self) -> None:
        """getattr(getattr(self, "a"), "b") becomes getattr(self, "a.b"); fetches of the
        same attribute become one."""
        seen: dict[tuple[int, str], Node] = {}
        for expr in self._exprs:
            if not isinstance(expr, GetAttr):
                continue
            base = expr.inputs[0]
            if isinstance(base.expr, GetAttr) and base.expr in self._exprs:
                expr.name = f"{base.expr.name}.{expr.name}"
                base.users.remove(expr)
                expr.inputs[0] = base.expr.inputs[0]
                expr.inputs[0].users.append(expr)
            key = (id(expr.inputs[0]), expr.name)
            if key not in seen:
                seen[key] = expr.outputs[0]
                continue
            old, keep = expr.outputs[0], seen[key]
            for user in list(old.users):
                user.inputs[:] = [keep if n is old else n for n in user.inputs]
                keep.users.append(user)
            old.users.clear()
            self._outputs[:] = [keep if n is old else n for n in self._outputs]

    def compile(self) -> None:
        """Merge repeated attribute fetches and drop the exprs the outputs do not need."""
        self._merge_getattr_expr()
        needed = {id(e) for e in self.get_dep_exprs(self._outputs)}
        for expr in list(self._exprs):
            if id(expr) in needed or expr._disable_remove:
                continue
            for n in expr.inputs:
                if expr in n.users:
                    n.users.remove(expr)
            self._exprs.remove(expr)
            for n in expr.outputs:
                self._namespace.unassociate_name_with_obj(n)

    def _reset_ids(self) -> None:
        for i, expr in enumerate(self._iter_exprs(True)):
            expr._id = i
        for i, node in enumerate(self._iter_nodes(True)):
            node._id = i
        self._ids_floor = (0, 0)      # renumbered: the next ids follow the last ones

    def _ids_valid(self) -> bool:
        """Every expr and node (recursively) has an id, and no two share one."""
        for items in (list(self._iter_exprs(True)), list(self._iter_nodes(True))):
            ids = [x._id for x in items]
            if min(ids, default=0) < 0 or len(set(ids)) != len(ids):
                return False
        return True

    @property
    def _total_ids(self) -> tuple[int, int]:
        """(next node id, next expr id) of this graph and the graphs it calls: ids are
        unique in a top-level TracedModule and new exprs take the next ones."""
        floor = getattr(self, "_ids_floor", (0, 0))
        node_ids = [n._id for n in self._iter_nodes(True)]
        expr_ids = [e._id for e in self._iter_exprs(True)]
        return (max([floor[0] - 1, *node_ids]) + 1, max([floor[1] - 1, *expr_ids]) + 1)

    @_total_ids.setter
    def _total_ids(self, value) -> None:
        self._ids_floor = (int(value[0]), int(value[1]))

    def _outermost(self) -> "InternalGraph":
        graph = self
        while graph.top_graph is not None and graph.top_graph is not graph:
            graph = graph.top_graph
        return graph

    def _number_new(self, exprs) -> None:
        """Give inserted exprs and their outputs the next free ids of the top graph."""
        top = self._outermost()
        next_node, next_expr = top._total_ids
        for expr in exprs:
            if expr._id < 0:
                expr._id, next_expr = next_expr, next_expr + 1
            for node in expr.outputs:
                if node._id < 0:
                    node._id, next_node = next_node, next_node + 1
        top._total_ids = (next_node, next_expr)

    # -- running ------------------------------------------------------------------------
    def interpret(self, *inputs) -> list:
        """Run the exprs on concrete values (inputs[0]: the module). With end points set,
        stop as soon as they are all computed and return their values."""
        values: dict[int, object] = {}
        watched = {id(n) for n in self._watch_point}
        ends = {id(n) for n in self._end_point}

        def store(node, value) -> bool:
            values[id(node)] = value
            if id(node) in watched:
                self._rst[node] = value
            ends.discard(id(node))
            return bool(self._end_point) and not ends

        for node, value in zip(self._inputs, inputs):
            if store(node, value):
                return [values[id(n)] for n in self._end_point]
        for expr in self._exprs:
            outs = expr.interpret(*[values[id(n)] for n in expr.inputs])
            if outs is None:
                continue
            if len(outs) != len(expr.outputs):
                raise AssertionError(f"{expr} made {len(outs)} values for "
                                     f"{len(expr.outputs)} outputs")
            for node, value in zip(expr.outputs, outs):
                if store(node, value):
                    return [values[id(n)] for n in self._end_point]
        return [values[id(n)] for n in self._outputs]

    def eval(self, *inputs):
        """Run the graph on tensors for `inputs[1:]` (the module is the graph's owner)."""
        if len(inputs) != len(self._inputs) - 1:
            raise AssertionError(f"expect {len(self._inputs) - 1} inputs, got {len(inputs)}")
        return self.interpret(self._inputs[0].owner, *inputs)

    def __repr__(self) -> str:
        return self.__format__()

    def __format__(self, format_spec: str = "") -> str:
        saved, Node._format_spec = Node._format_spec, format_spec
        try:
            name = f"{self._name}.Graph" if self._name else ""
            body = "\n\t".join(str(e) for e in self._exprs)
            return "{} ({}) {{\n\t{}\n\treturn {}\n}}".format(
                name, ", ".join(str(i) for i in self._inputs), body,
                ", ".join(str(o) for o in self._outputs))
        finally:
            Node._format_spec = saved



def _leaf_defs(treedef):
    """The LeafDefs of `treedef`, in flattening order."""
    if isinstance(treedef, LeafDef):
        return [treedef]
    return [leaf for ch in treedef.children_defs for leaf in _leaf_defs(ch)]
