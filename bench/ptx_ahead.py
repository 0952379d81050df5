"""Compile here, ahead, the PTX a GPU machine's call would compile: launches recorded on ``cuda-sim``, compiled for a cc.

Why: a lent GPU machine has minutes, and numba compiles every kernel a
process launches the first time (up to 20 s a TPC-H query on the H100). The
PTX cache (:mod:`gpu_engine.kernels.ptx_cache`) keys an entry by the kernel's
code fingerprint, its argument types, the compute capability, the compile
options and the toolchain (numba, numba-cuda and Python versions); this
machine has libNVVM (CUDA 13.0), so ``numba.cuda.compile_ptx`` compiles for
any compute capability without a GPU. Two things only the GPU run knows are
taken from elsewhere:

* which kernels a query launches, with which argument types: recorded here by
  running the queries on ``cuda-sim`` (the same kernels, static and
  generated, and the same argument dtypes; a size-dependent path can differ);
* the toolchain part of the key: ``--toolchain``, the ``ptx_toolchain`` that
  ``bench/gpu_session.sh``'s ``env`` step records on the machine (the entries
  are compiled by this machine's numba, keyed as the machine's).

Whether the machine finds them is seen there at no cost: ``env`` counts the PTX
files carried, and the ``tpch`` step's report counts the kernels its first runs
still compiled (``JIT (PTX compiles ...)``). An entry it does not find is
compiled there, as without this tool; an entry whose parameters do not match
the launch is refused by the driver path's check and numba launches it.

    python -m bench.ptx_ahead --cc 9.0 --toolchain "numba=0.68.1 numba-cuda=0.30.0 python=3.12" \\
        --sf 0.001 --queries all --out .gpucache/ptx
    tar czf .gpucache.tgz -C .gpucache .        # then carry .gpucache.tgz with bench/gpu_session.sh

Not measured on a GPU yet: no GPU machine was lent when it was written.
"""

from __future__ import annotations

import argparse
import glob
import importlib
import importlib.util
import json
import os
import subprocess
import sys
import time
import types as pytypes
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

__all__ = ["main", "argument_items"]

_UINT64 = "uint64-int"  # a Python int past int64, which numba types as uint64


def argument_items(arguments) -> list:
    """Return a JSON-able item per launch argument: ``["array", dtype, ndim, layout]`` or a scalar's type name."""
    import numpy as np

    items = []
    for argument in arguments:
        if isinstance(argument, np.ndarray):
            layout = "C" if argument.flags.c_contiguous else "F" if argument.flags.f_contiguous else "A"
            items.append(["array", argument.dtype.str, argument.ndim, layout])
        elif type(argument) is int and not -(1 << 63) <= argument < (1 << 63):
            items.append(_UINT64)
        elif type(argument) in (bool, int, float, complex):
            items.append(type(argument).__name__)
        elif isinstance(argument, np.generic):
            items.append(["scalar", argument.dtype.str])
        else:
            raise TypeError(f"cannot record an argument of type {type(argument).__qualname__}")
    return items


def _record(manifest: Path, sf: float, queries: str) -> int:
    """Run the TPC-H queries on cuda-sim, recording every kernel launch (kernel, argument types); write the manifest."""
    import gpu_engine.kernels.launch as launch
    from bench.tpch_queries import available_bench_queries, bench_query
    from gpu_engine import Session
    from gpu_engine.connectors.tpch_data import ensure_tpch, register_tpch

    original = launch.launch_cuda
    records: dict[tuple, dict] = {}
    refused: dict[str, str] = {}

    def recording(device, kernel, n, *arguments, max_blocks=None):
        function = getattr(kernel, "py_func", None)
        if n and function is not None:
            name = f"{function.__module__}.{function.__qualname__}"
            try:
                items = argument_items(arguments)
            except TypeError as error:
                refused[name] = str(error)
            else:
                key = (name, json.dumps(items))
                if key not in records:
                    path = getattr(function.__code__, "co_filename", None)
                    records[key] = {"module": function.__module__, "qualname": function.__qualname__,
                                    "path": path, "arguments": items}
        return original(device, kernel, n, *arguments, max_blocks=max_blocks)

    def patch() -> None:
        for module in list(sys.modules.values()):
            if getattr(module, "launch_cuda", None) is original:
                module.launch_cuda = recording

    patch()
    session = Session(device="cuda-sim", drivers=1)
    register_tpch(session, ensure_tpch(sf, progress=False))
    names = available_bench_queries() if queries == "all" else [q.strip() for q in queries.split(",") if q.strip()]
    for name in names:
        patch()  # modules imported since (generated ones bind the recording at their import)
        start = time.perf_counter()
        try:
            session.execute(bench_query(name, sf).build_plan(session.catalog))
            outcome = "ok"
        except Exception as error:  # noqa: BLE001 - record what ran, go on
            outcome = f"{type(error).__name__}: {str(error)[:200]}"
        print(f"recorded {name}: {outcome} ({time.perf_counter() - start:.1f} s, {len(records)} launches so far)",
              flush=True)
    manifest.write_text(json.dumps({"sf": sf, "queries": names, "launches": list(records.values()),
                                    "refused": refused}, indent=1) + "\n")
    return 0


def _kernel(record: dict):
    name = record["module"]
    module = sys.modules.get(name)
    if module is None:
        if name.startswith("gpu_engine_generated_"):
            spec = importlib.util.spec_from_file_location(name, record["path"])
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(name)
    value = module
    for part in record["qualname"].split("."):
        value = getattr(value, part)
    return value


def _signature(items: list) -> tuple:
    import numpy as np
    from numba.core import types
    from numba.np import numpy_support

    signature = []
    for item in items:
        if item == _UINT64:
            signature.append(types.uint64)
        elif isinstance(item, str):
            signature.append({"bool": types.boolean, "int": types.int64, "float": types.float64,
                              "complex": types.complex128}[item])
        elif item[0] == "array":
            signature.append(types.Array(numpy_support.from_dtype(np.dtype(item[1])), item[2], item[3]))
        else:
            signature.append(numpy_support.from_dtype(np.dtype(item[1])))
    return tuple(signature)


def _compile(manifest: Path, cc: tuple[int, int], toolchain: str | None, out: Path) -> int:
    """Compile every recorded launch for ``cc`` into the PTX cache at ``out``, keyed with ``toolchain``."""
    import numba.cuda.dispatcher as dispatcher

    # Device functions ask the current GPU for its compute capability; there is none here.
    dispatcher.get_current_device = lambda: pytypes.SimpleNamespace(compute_capability=cc)
    from gpu_engine.kernels.driver_launch import UnsupportedLaunch, _compile_options
    from gpu_engine.kernels.ptx_cache import PtxCache

    cache = PtxCache(cc, directory=out)
    if toolchain:
        cache._toolchain = toolchain  # keyed as the machine that launches them keys its entries
    launches = json.loads(manifest.read_text())["launches"]
    compiled = cached = failed = 0
    start = time.perf_counter()
    for record in launches:
        name = f"{record['module']}.{record['qualname']}"
        try:
            kernel = _kernel(record)
            outcome = cache.ptx(kernel, _signature(record["arguments"]), _compile_options(kernel)).record.outcome
        except UnsupportedLaunch as error:
            print(f"skipped {name}: the driver path does not launch it ({error})")
            continue
        except Exception as error:  # noqa: BLE001 - report and go on
            failed += 1
            print(f"FAILED {name} {record['arguments']}: {type(error).__name__}: {str(error)[:300]}")
            continue
        compiled += outcome == "compiled"
        cached += outcome == "disk"
    print(f"PTX for sm_{cc[0]}{cc[1]} in {out}: {compiled} compiled, {cached} already there, {failed} failed, "
          f"{time.perf_counter() - start:.1f} s; toolchain key {cache._toolchain!r}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    """Record the launches on cuda-sim in one process, compile them in another (no simulator); return 1 on failures."""
    parser = argparse.ArgumentParser(prog="python -m bench.ptx_ahead", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cc", default="9.0", help="compute capability of the GPU machine (default 9.0: H100, H200)")
    parser.add_argument("--toolchain", default=None,
                        help="the machine's ptx_toolchain (gpu_session's env step); default this machine's")
    parser.add_argument("--sf", type=float, default=0.001, help="TPC-H scale factor of the recording (default 0.001)")
    parser.add_argument("--queries", default="all", help="TPC-H queries to record (default all)")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / ".gpucache" / "ptx", help="the PTX cache folder")
    parser.add_argument("--manifest", type=Path, default=None, help="the launches' file (default <out>/../launches.json)")
    parser.add_argument("--phase", choices=("both", "record", "compile"), default="both", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    cc = tuple(int(part) for part in args.cc.split("."))
    manifest = args.manifest or args.out.parent / "launches.json"
    manifest.parent.mkdir(parents=True, exist_ok=True)
    if args.phase == "record":
        return _record(manifest, args.sf, args.queries)
    if args.phase == "compile":
        return _compile(manifest, cc, args.toolchain, args.out)
    common = ["--cc", args.cc, "--sf", str(args.sf), "--queries", args.queries, "--out", str(args.out),
              "--manifest", str(manifest)] + (["--toolchain", args.toolchain] if args.toolchain else [])
    record_env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "GPU_ENGINE_COMPILE_MODE": "inline"}
    code = subprocess.run([sys.executable, "-m", "bench.ptx_ahead", "--phase", "record", *common], cwd=REPO_ROOT,
                          env=record_env).returncode
    if code:
        return code
    compile_env = {key: value for key, value in os.environ.items() if key != "NUMBA_ENABLE_CUDASIM"}
    if not compile_env.get("CUDA_HOME"):
        homes = sorted(glob.glob("/usr/local/cuda*/nvvm"), reverse=True)
        if homes:
            compile_env["CUDA_HOME"] = os.path.dirname(homes[0])
    return subprocess.run([sys.executable, "-m", "bench.ptx_ahead", "--phase", "compile", *common], cwd=REPO_ROOT,
                          env=compile_env).returncode


if __name__ == "__main__":
    sys.exit(main())
