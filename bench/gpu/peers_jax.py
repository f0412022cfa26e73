# bench/gpu/peers_jax.py - JAX (jit) on bench/gpu's workloads, the same
# shapes as peers.py. Prints `name jax_GBs` lines (ideal bytes); nothing
# when JAX or a GPU is missing. Timed with the wall clock around
# block_until_ready (median of N after warm-up): JAX has no CUDA events
# API, so its figures include one dispatch (~10 us, a few % here).
# `peers_jax.py N NAME...` runs only the workloads named.
import os
import sys
import time
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
try:
    import jax
    import jax.numpy as jnp
    assert any(d.platform == "gpu" for d in jax.devices())
except Exception:
    sys.exit(0)
N = int(sys.argv[1]) if len(sys.argv) > 1 else 20
only = set(sys.argv[2:])  # workload names; none: all
f32, bf16 = jnp.float32, jnp.bfloat16
key = jax.random.PRNGKey(0)


def r(*shape, dt=f32):
    return jax.random.normal(key, shape, dtype=f32).astype(dt)


def med(fn, args):
    out = fn(*args)
    out.block_until_ready()
    for _ in range(2):
        fn(*args).block_until_ready()
    ts = []
    for _ in range(N):
        t0 = time.perf_counter()
        fn(*args).block_until_ready()
        ts.append(time.perf_counter() - t0)
    ts.sort()
    nb = sum(a.size * a.dtype.itemsize for a in args) + out.size * out.dtype.itemsize
    return nb / (ts[len(ts) // 2] * 1e9)


def chain10(x, a, b):
    y = jax.nn.relu(x * a + b) * a - b
    y = -((jnp.abs(y) + a) * b)
    return jnp.maximum(y, x)


def layer_norm(x, y, s, b):
    z = x + y
    m = z.mean(-1, keepdims=True)
    v = ((z - m) ** 2).mean(-1, keepdims=True)
    return (z - m) * jax.lax.rsqrt(v + 1e-5) * s + b


def rms_norm(x, s):
    return x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + 1e-5) * s


R, C = 32768, 4096
gelu = lambda x, b: jax.nn.gelu(x + b, approximate=False)
work = [
    ("01_relu_affine", lambda x, s, b: jax.nn.relu(x * s + b), lambda: (r(R, C), jnp.float32(1.5), r(C))),
    ("02_chain10_f32", chain10, lambda: (r(R, C), jnp.float32(1.5), jnp.float32(0.5))),
    ("03_chain10_bf16", chain10, lambda: (r(R, C, dt=bf16), jnp.bfloat16(1.5), jnp.bfloat16(0.5))),
    ("04a_bias_gelu_f32", gelu, lambda: (r(R, C), r(C))),
    ("04b_bias_gelu_bf16", gelu, lambda: (r(R, C, dt=bf16), r(C, dt=bf16))),
    ("05_softmax_1024", lambda x: jax.nn.softmax(x, axis=1), lambda: (r(131072, 1024),)),
    ("06_softmax_4096", lambda x: jax.nn.softmax(x, axis=1), lambda: (r(32768, 4096),)),
    ("07_softmax_16384", lambda x: jax.nn.softmax(x, axis=1), lambda: (r(8192, 16384),)),
    ("08_softmax_65536", lambda x: jax.nn.softmax(x, axis=1), lambda: (r(2048, 65536),)),
    ("09_softmax_4096_bf16", lambda x: jax.nn.softmax(x, axis=1), lambda: (r(32768, 4096, dt=bf16),)),
    ("10_layer_norm_res", layer_norm, lambda: (r(R, C), r(R, C), r(C), r(C))),
    ("11_rms_norm", rms_norm, lambda: (r(R, C), r(C))),
    ("12_row_sum", lambda x: x.sum(1), lambda: (r(16384, 8192),)),
    ("13_col_sum", lambda x: x.sum(0), lambda: (r(16384, 8192),)),
    ("14_softmax_65536_bf16", lambda x: jax.nn.softmax(x, axis=1), lambda: (r(2048, 65536, dt=bf16),)),
    ("15_layer_norm_res_65536", layer_norm, lambda: (r(2048, 65536), r(2048, 65536), r(65536), r(65536))),
    # bf16 counterparts of the f32 workloads above
    ("16_relu_affine_bf16", lambda x, s, b: jax.nn.relu(x * s + b), lambda: (r(R, C, dt=bf16), jnp.bfloat16(1.5), r(C, dt=bf16))),
    ("17_softmax_1024_bf16", lambda x: jax.nn.softmax(x, axis=1), lambda: (r(131072, 1024, dt=bf16),)),
    ("18_softmax_16384_bf16", lambda x: jax.nn.softmax(x, axis=1), lambda: (r(8192, 16384, dt=bf16),)),
    ("19_layer_norm_res_bf16", layer_norm, lambda: (r(R, C, dt=bf16), r(R, C, dt=bf16), r(C, dt=bf16), r(C, dt=bf16))),
    ("20_rms_norm_bf16", rms_norm, lambda: (r(R, C, dt=bf16), r(C, dt=bf16))),
    ("21_row_sum_bf16", lambda x: x.sum(1), lambda: (r(16384, 8192, dt=bf16),)),
    ("22_col_sum_bf16", lambda x: x.sum(0), lambda: (r(16384, 8192, dt=bf16),)),
    ("23_layer_norm_res_65536_bf16", layer_norm, lambda: (r(2048, 65536, dt=bf16), r(2048, 65536, dt=bf16), r(65536, dt=bf16), r(65536, dt=bf16))),
]
for name, fn, make in work:
    if only and name not in only:
        continue
    try:
        args = make()
        print(f"{name} {med(jax.jit(fn), args):.1f}", flush=True)
        del args
    except Exception as e:  # keep the other rows
        print(f"# {name}: {type(e).__name__}", file=sys.stderr)
