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


# fuse's element type names: torch's dtype names and sizes in bytes.
TORCH_DTYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32"}
ELT_BYTES = {"f16": 2, "bf16": 2, "f32": 4}


def torch_on_gpu():
    """torch where it runs on a GPU here, else None (the tables then have
    fuse's columns only)."""
    try:
        import torch
        return torch if torch.cuda.is_available() else None
    except Exception:
        return None


def copy_us(nbytes, reps, flush, cache):
    """Microseconds of a device-to-device copy of nbytes (read + write:
    the copy rate the tables compare with), timed as median_ms with flush;
    cache (a dict) keeps one time per size."""
    import torch
    if nbytes not in cache:
        src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        src.fill_(1)
        cache[nbytes] = median_ms(dst.copy_, (src,), reps, flush) * 1e3
        del src, dst
    return cache[nbytes]


def copy_rates(cache):
    """The copy rates of copy_us's cache, "8 MiB: 3900 GB/s, ..."."""
    return ", ".join(f"{b / 2**20:.1f} MiB: {2 * b / (u * 1e3):.0f} GB/s"
                     for b, u in sorted(cache.items()))


def device_text(torch):
    """The GPU's name and torch's version, for a table's last line."""
    if not torch:
        return "torch not found"
    return f"{torch.cuda.get_device_name()}; torch {torch.__version__}"
