"""conflux: topology-aware collective communication for host memory.

    import numpy as np, conflux
    comm = conflux.Comm.from_env()          # under `conflux run`, torchrun, mpirun, srun
    x = np.ones(1024, np.float32)
    comm.allreduce(x)                       # in place; comm.allreduce(x, y) writes y
    req = comm.iallgather(x, out)           # nonblocking: req.wait() / req.test()

Buffers are any C-contiguous buffer-protocol object (numpy arrays,
bytearray, memoryview, array.array); the element type comes from the buffer
(or dtype=, e.g. DataType.BFLOAT16 over a uint16 array). Failures raise
conflux.Error carrying the library's message and result code. Blocking calls
release the GIL. `conflux.MoE` dispatches tokens to experts and combines
them back (numpy and torch, with autograd). `import conflux.torch` registers
the "conflux" backend of torch.distributed.
"""

import contextlib as _contextlib

from ._errors import Error
from ._conflux import (  # noqa: F401  (re-exported API)
    Comm, Request, RedOp, DataType, Result,
    SUM, PROD, MAX, MIN, AVG,
    INT8, UINT8, INT32, UINT32, INT64, UINT64, FLOAT16, FLOAT32, FLOAT64, BFLOAT16,
    get_unique_id, version, type_size, error_string, group_start, group_end,
)

from .moe import MoE, Dispatched  # noqa: E402  (needs _conflux above)

SPLIT_NOCOLOR = -1


@_contextlib.contextmanager
def group():
    """Context manager around group_start()/group_end()."""
    group_start()
    try:
        yield
    finally:
        group_end()


__all__ = [
    "Error", "Comm", "Request", "RedOp", "DataType", "Result", "SPLIT_NOCOLOR",
    "MoE", "Dispatched", "get_unique_id", "version", "type_size", "error_string", "group_start", "group_end", "group",
]
