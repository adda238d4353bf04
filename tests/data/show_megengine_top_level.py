"""The subpackages `import megengine` makes attributes of the package (its __init__.py
imports them), as tests/test_package_surface.py asserts them (run with
/work/shared/megref/mpy; prints, writes nothing). Output on 1.13.0, CPU:

  subpackages: ['amp', 'autodiff', 'core', 'data', 'distributed', 'dtr', 'functional', 'hub', 'jit', 'module', 'optimizer', 'quantization', 'random', 'traced_module', 'utils']
  mge.data: megengine.data DataLoader
"""
import megengine as mge

print("subpackages:", sorted(name for name, value in vars(mge).items()
                             if getattr(value, "__name__", None) == "megengine." + name
                             and hasattr(value, "__path__")))
print("mge.data:", mge.data.__name__, mge.data.DataLoader.__name__)
