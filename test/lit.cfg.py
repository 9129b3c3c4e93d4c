# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "fsdpc"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "unit", "Inputs", "compare_with_torch.py", "export_foreign_mlp.py", "torch_reference.py", "sharded_equality.py", "compare_losses.py", "state_dicts.py", "run_node_tests.py", "skip.txt", "gradient_check.py", "gpt_vs_torch.py", "headroom.py", "narrow_floats.py", "recompute_equality.py", "devices_agree.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.fsdpc_obj_root, "test")

# FileCheck and not live in llvm_tools_dir; only FileCheck-22 is on PATH.
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.fsdpc_tools_dir, append_path=True)
llvm_config.use_default_substitutions()

# The reference oracle (torch, onnx, numpy) only works with the system Python.
config.substitutions.append(("%python", "/usr/bin/python3"))
config.substitutions.append(("%fsdpc_src", config.fsdpc_src_root))
config.environment["PYTHONDONTWRITEBYTECODE"] = "1"
config.environment["OMP_NUM_THREADS"] = os.environ.get("OMP_NUM_THREADS", "2")

# The sanitizer build (tools/test.sh --sanitize): "asan" marks tests that
# cannot run under it, and the sanitizers' settings reach every process.
if config.fsdpc_sanitize:
    config.available_features.add("asan")
    for name in ("ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS", "OMPI_MCA_mca_base_component_disable_dlclose"):
        if name in os.environ:
            config.environment[name] = os.environ[name]

# A shell prefix that makes any allocation over 3 GB fail: an address-space
# limit, or under ASan (which reserves terabytes of shadow address space, so
# no such limit can be set) ASan's own cap on one allocation.
if config.fsdpc_sanitize:
    config.substitutions.append(("%limit_memory_3g", 'export ASAN_OPTIONS="$ASAN_OPTIONS:max_allocation_size_mb=3000";'))
else:
    config.substitutions.append(("%limit_memory_3g", "ulimit -v 3000000;"))

# "gpu" where nvidia-smi lists a GPU: tests of what happens without one are
# UNSUPPORTED there (and the GPU checks run through ctest's gpu label).
import shutil as _shutil
import subprocess as _subprocess
_smi = _shutil.which("nvidia-smi")
if _smi and "GPU " in _subprocess.run([_smi, "-L"], capture_output=True, text=True).stdout:
    config.available_features.add("gpu")
