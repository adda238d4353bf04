"""TVM imported through megtrace (relay_bridge/_tvm.py lists tvm_ffi's global function
names once per registry size during the import) fills every `_ffi_api` module with the
same functions as a plain `import tvm`, leaves tvm_ffi's own lister in place after, and
lists a function registered while it is in force."""
import json
import subprocess
import sys

_FFI_APIS = """
import json, sys
{importer}
import tvm_ffi
apis = {{name: sorted(k for k, v in vars(mod).items() if isinstance(v, tvm_ffi.Function))
        for name, mod in sorted(sys.modules.items())
        if name.endswith("_ffi_api") and mod is not None}}
from tvm_ffi import registry
print(json.dumps({{"apis": apis, "lister": registry.list_global_func_names.__module__ + "."
                   + registry.list_global_func_names.__qualname__}}))
"""


def _ffi_apis(importer: str) -> dict:
    out = subprocess.run([sys.executable, "-c", _FFI_APIS.format(importer=importer)],
                         capture_output=True, text=True, check=True, timeout=300)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_every_ffi_api_module_gets_the_functions_of_a_plain_import():
    # both import megtrace first (it imports no TVM), so they hold the same modules
    plain = _ffi_apis("import megtrace.relay_bridge._tvm\nimport tvm\nfrom tvm import relax")
    ours = _ffi_apis("from megtrace.relay_bridge._tvm import tvm\ntvm()")
    assert len(plain["apis"]) >= 30                   # TVM's namespaces, not a handful
    assert sum(map(len, plain["apis"].values())) >= 1000
    assert ours["apis"] == plain["apis"]
    assert ours["lister"] == plain["lister"] == "tvm_ffi.registry.list_global_func_names"


def test_a_function_registered_meanwhile_is_listed():
    import tvm_ffi
    from tvm_ffi import registry

    from megtrace.relay_bridge._tvm import _global_names_listed_once, tvm
    tvm()
    name = "megtrace_test.registered_during_import"
    with _global_names_listed_once():
        assert name not in registry.list_global_func_names()
        tvm_ffi.register_global_func(name, lambda: 1)
        try:
            assert name in registry.list_global_func_names()
        finally:
            tvm_ffi.remove_global_func(name)
