# bench/gpu/cuda_timing.py - how the torch peers of bench/gpu/*_peers.py
# time a call, the way fuse-run --bench does: 3 warm-up calls, then the
# median of `reps` calls each between two CUDA events, in milliseconds.


def median_ms(fn, args, reps, flush=None):
    """flush: a device tensor overwritten before each timed call (L2-cold
    timing, as fuse-run --bench-cold), or None."""
    import torch  # the callers exit quietly where it is missing
    for _ in range(3):
        fn(*args)
    torch.cuda.synchronize()
    ts = []
    for i in range(reps):
        if flush is not None:
            flush.fill_(i & 0xFF)
        a, b = torch.cuda.Event(True), torch.cuda.Event(True)
        a.record(); fn(*args); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]
