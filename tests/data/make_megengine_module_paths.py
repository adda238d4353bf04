"""MegEngine 1.13's public names per module path (each file's `__all__`, or its public
top-level classes and functions where it has none), for tests/test_megengine_paths.py.

    python tests/data/make_megengine_module_paths.py MEGENGINE_GIT_DIR > tests/data/megengine_module_paths.json

MEGENGINE_GIT_DIR: a clone of github.com/MegEngine/MegEngine holding the v1.13.0 tag.
"""
import ast
import json
import subprocess
import sys

# not part of the Python API megtrace re-implements: MegEngine's internals (core, the
# traced_module implementation's own submodules), CUDA/XLA-only or process-launching
# pieces, C++ custom-op building; the graph tools and hub are measured elsewhere
SKIP_PARTS = ("core", "xla", "tools", "distributed", "conftest", "utils.network",
              "utils.comp_graph_tools", "utils.profiler", "utils.module_stats", "hub",
              "traced_module.", "utils.custom_op_tools", "utils.network_node", "jit.xla_backend")


def public_names(src: str) -> list[str]:
    tree = ast.parse(src)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__"
                                                for t in node.targets):
            try:
                return list(ast.literal_eval(node.value))
            except ValueError:
                pass
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))
            and not n.name.startswith("_")]


def main(repo: str) -> None:
    root = "imperative/python/"
    files = subprocess.run(["git", "-C", repo, "ls-tree", "-r", "--name-only", "v1.13.0",
                            root + "megengine"], capture_output=True, text=True,
                           check=True).stdout.split()
    out = {}
    for f in sorted(files):
        if not f.endswith(".py"):
            continue
        mod = f[len(root):-3].replace("/", ".").removesuffix(".__init__")
        parts = mod.split(".")[1:]
        dotted = ".".join(parts) + "."
        if any(p.startswith("_") for p in parts) or any(
                dotted.startswith(s) and dotted != s if s.endswith(".")
                else dotted.startswith(s + ".") for s in SKIP_PARTS):
            continue
        src = subprocess.run(["git", "-C", repo, "show", f"v1.13.0:{f}"], capture_output=True,
                             text=True, check=True).stdout
        names = sorted(set(public_names(src)))
        if names:
            out[mod] = names
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main(sys.argv[1])
