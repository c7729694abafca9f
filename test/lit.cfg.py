# -*- Python -*-
# lit configuration for the fusion compiler tests.

import os
import sys

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "FUSION"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.fusion_obj_root, "test")
config.excludes = ["CMakeLists.txt", "README.md", "lit.cfg.py", "lit.site.cfg.py"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%fusion_src_root", config.fusion_src_root))
config.environment["FILECHECK_OPTS"] = "--enable-var-scope"

# lit.site.cfg.py takes python_executable from CMake's Python3_EXECUTABLE,
# which is empty unless find_package(Python3) ran; fall back to the Python
# that runs lit. use_default_substitutions() defines %python the same way.
if not getattr(config, "python_executable", ""):
    config.python_executable = sys.executable

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

tool_dirs = [os.path.join(config.fusion_obj_root, "bin"), config.llvm_tools_dir]
llvm_config.add_tool_substitutions(
    ["fusion-opt", "fusion-compile", "fusion-import", "fusion-translate"], tool_dirs)
config.substitutions.append(
    ("%fusion_bin", os.path.join(config.fusion_obj_root, "bin")))

# ptxas (CUDA toolkit) assembles emitted PTX in tests marked
# `REQUIRES: ptxas`; they are skipped where it is absent.
def _find_ptxas():
    import shutil
    for var in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"):
        root = os.environ.get(var)
        if root and os.path.isfile(os.path.join(root, "bin", "ptxas")):
            return os.path.join(root, "bin", "ptxas")
    if os.path.isfile("/usr/local/cuda/bin/ptxas"):
        return "/usr/local/cuda/bin/ptxas"
    return shutil.which("ptxas")

_ptxas = _find_ptxas()
if _ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", _ptxas))
