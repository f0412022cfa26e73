# bench/gpu/cuda_timing.py - how the torch peers of bench/gpu/*_peers.py
# time a call, the way fuse-run --bench does: 3 warm-up calls, then the
# median of `reps` calls each between two CUDA events, in milliseconds.


def median_ms(fn, args, reps):
    import torch  # the callers exit quietly where it is missing
    for _ in range(3):
        fn(*args)
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(True), torch.cuda.Event(True)
        a.record(); fn(*args); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]
