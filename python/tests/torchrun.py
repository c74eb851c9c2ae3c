#!/usr/bin/env python3
"""torchrun (torch.distributed.run) with the fixes Debian's torch packages need.

    python3 torchrun.py --nproc-per-node 2 script.py args...   (torchrun's own arguments)

Parses the arguments and launches with torch.distributed.run itself; each
worker runs this file first, which applies the same fixes and then runs
script.py as __main__. The fixes, each applied only when the defect is there:
  * torch 2.x built without libuv (Debian 13): TCPStore's default asks for
    libuv, and both torchrun's rendezvous and the workers' env:// store (as
    clients of torchrun's store) take the default, so every launch fails with
    "use_libuv was requested but PyTorch was build without libuv support".
    Stores are created with use_libuv=False unless a caller says otherwise.
  * torch 2.6's fully_shard (FSDP2) records and waits on events of the
    device's streams, which torch.cpu.Stream does not implement (it has
    wait_stream only), so fully_shard on the CPU fails under every backend
    with "'Stream' object has no attribute 'record_event'". CPU streams run
    in program order, so an event recorded on one is complete at once:
    record_event returns a torch.cpu.Event and wait_event does nothing.
  * torch 1.13 on Python 3.11 (Debian 12): Std.from_str("0") returns None,
    since Python 3.11 no longer iterates an IntFlag's zero member, so the
    default --redirects 0 / --tee 0 crash torchrun. "0" maps to Std.NONE.
"""
import functools
import importlib
import os
import runpy
import sys

import torch.distributed as dist

_WORKER = "--conflux-torchrun-worker"


def _fix_libuv():
    try:
        dist.TCPStore("127.0.0.1", 0, 1, True, wait_for_workers=False)
        return
    except RuntimeError as e:
        if "libuv" not in str(e):
            raise
    os.environ["USE_LIBUV"] = "0"
    original = dist.TCPStore

    @functools.wraps(original)
    def tcp_store(*args, **kwargs):
        kwargs.setdefault("use_libuv", False)
        return original(*args, **kwargs)
    # Where torch's code looks TCPStore up: torch.distributed's attribute, or
    # the name these modules imported.
    # (torch.distributed.rendezvous is also the name of a function in
    # torch.distributed, hence import_module.)
    names = ("torch.distributed.rendezvous", "torch.distributed.elastic.rendezvous.static_tcp_rendezvous",
             "torch.distributed.elastic.rendezvous.c10d_rendezvous_backend")
    for module in (dist, *(importlib.import_module(n) for n in names)):
        if getattr(module, "TCPStore", None) is original:
            module.TCPStore = tcp_store


def _fix_cpu_stream_events():
    import torch
    cpu = getattr(torch, "cpu", None)
    stream = getattr(cpu, "Stream", None)
    if stream is None or hasattr(stream, "record_event"):
        return

    def record_event(self, event=None):
        event = event if event is not None else cpu.Event()
        event.record(self)
        return event

    def wait_event(self, event):
        pass  # work on a CPU stream is already done in program order
    stream.record_event = record_event
    stream.wait_event = wait_event


def _fix_std_zero():
    from torch.distributed.elastic.multiprocessing import api
    if api.Std.from_str("0") is not None:
        return
    original = api.Std.from_str.__func__

    def from_str(cls, vm):
        result = original(cls, vm)
        if result is None:  # only a zero value is lost this way
            return cls.NONE
        if isinstance(result, dict):
            return {k: (cls.NONE if v is None else v) for k, v in result.items()}
        return result
    api.Std.from_str = classmethod(from_str)


def main():
    _fix_libuv()
    _fix_cpu_stream_events()
    if len(sys.argv) > 2 and sys.argv[1] == _WORKER:
        script = sys.argv[2]
        sys.argv = sys.argv[2:]
        sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
        runpy.run_path(script, run_name="__main__")
        return
    _fix_std_zero()
    from torch.distributed import run
    args = run.parse_args(sys.argv[1:])
    if getattr(args, "no_python", False) or getattr(args, "module", False):
        sys.exit("torchrun.py: --no-python and -m are not supported; pass a script")
    args.training_script_args = [_WORKER, args.training_script, *args.training_script_args]
    args.training_script = os.path.abspath(__file__)
    run.run(args)


if __name__ == "__main__":
    main()
