"""fp8prof: FP8 training numerics from Python (over libfp8prof through ctypes).

    import fp8prof
    fp8prof.formats()                                  # every built-in format
    codes = fp8prof.cast(x, "e4m3")                    # uint8 codes, nearest-even, saturating
    x_hat, stats = fp8prof.quantize(x, "mxfp8")        # every statistic (docs/statistics.md)
    with fp8prof.Run("run.h5") as run: ...             # recording (fp8prof.record)
    run = fp8prof.open_run("run.h5")                   # reading (fp8prof.read)
    fp8prof.torch.Profiler(model, "run.h5", ...)       # PyTorch hooks (import fp8prof.torch)

numpy is required; torch only for fp8prof.torch.
"""
from ._lib import Error, ROLES
from .core import Recipe, cast, decode, formats, quantize, stats_dtype
from .read import RunData, open_run, summary_dtype
from .record import Probe, Run

__version__ = "1.0.0"
__all__ = ["Error", "ROLES", "Recipe", "cast", "decode", "formats", "quantize", "stats_dtype", "RunData",
           "open_run", "summary_dtype", "Probe", "Run"]
