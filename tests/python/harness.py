"""Runs a function on `world` processes of this host, each in a torch.distributed job of the
gradsync backend (and, where asked, a gloo group over the same store), and returns what each
rank returned or raised. Processes are forked from a server process that imported torch and
gradsync once (multiprocessing's forkserver: not from the test's own process, and 2 s sooner
than a fresh interpreter that imports torch) and killed if they outlive the harness's limit,
so a hang fails its test instead of stalling the suite."""
import datetime
import multiprocessing
import os
import queue
import tempfile
import time
import traceback


def _entry(rank, world, store, backend, timeout, target, args, results):
    try:
        import torch.distributed as dist

        import gradsync.torch  # noqa: F401  registers the backend

        dist.init_process_group(backend, init_method=f"file://{store}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=timeout))
        value = target(rank, world, *args)
        dist.destroy_process_group()
        results.put((rank, "ok", value))
    except BaseException as e:  # every failure goes back to the test, named
        results.put((rank, "error", f"{type(e).__name__}: {e}", traceback.format_exc()))


def launch(world, target, *args, backend="gradsync", timeout=20.0, limit=120.0):
    """{rank: ("ok", value) | ("error", message, traceback) | ("lost", exitcode)}."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["torch.distributed", "gradsync.torch"])  # before any thread pool starts
    results = context.Queue()
    outcome = {}
    with tempfile.TemporaryDirectory(prefix="gradsync-test-") as directory:
        store = os.path.join(directory, "store")
        processes = [context.Process(target=_entry, args=(rank, world, store, backend, timeout, target, args, results))
                     for rank in range(world)]
        for p in processes:
            p.start()
        end = time.monotonic() + limit
        while len(outcome) < world and time.monotonic() < end:
            try:
                reply = results.get(timeout=0.2)
                outcome[reply[0]] = reply[1:]
            except queue.Empty:
                if all(not p.is_alive() for p in processes) and results.empty():
                    break
        for p in processes:
            p.join(timeout=max(0.0, end - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join()
        for rank, p in enumerate(processes):
            outcome.setdefault(rank, ("lost", p.exitcode))
    return outcome


def values(outcome):
    """Each rank's value; fails naming every rank that did not return one."""
    bad = {rank: reply for rank, reply in outcome.items() if reply[0] != "ok"}
    assert not bad, "\n".join(f"rank {rank}: {reply[1]}\n{reply[2] if len(reply) > 2 else ''}" for rank, reply in bad.items())
    return [outcome[rank][1] for rank in sorted(outcome)]
