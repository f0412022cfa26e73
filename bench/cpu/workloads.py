#!/usr/bin/python3
"""The CPU benchmark's workloads as fuse graph functions.

  workloads.py NAME ELEMENTS [COLUMNS]   prints the .fuse text of NAME on a
                                         [ELEMENTS/COLUMNS, COLUMNS] f32 input

NAME is one of (x: [R, C]; s, b, g: [C]; r: [R, C]):
  relu      relu(x * s + b)
  gelu      gelu(x + b)                       (exact: erf)
  softmax   softmax(x) over rows (reduce_max, sub, exp, reduce_sum, div)
  layernorm layer_norm(x + r) * g + b over rows (epsilon 1e-5; add,
            reduce_mean, sub, mul, reduce_mean, add, sqrt, div, mul, add)
Bytes counted (ideal: every input read once, every output written once)
are printed by `workloads.py --bytes NAME ELEMENTS [COLUMNS]`.

  workloads.py mmgelu M [K N [DTYPE]]    gelu(x @ w + b): x [M, K], w [K, N],
                                         b [N] (K = N = M by default;
                                         DTYPE f32 or bf16, default f32)
`workloads.py --flops mmgelu M [K N]` prints 2 M K N.

  workloads.py conv SHAPE [DTYPE]         relu(conv2d(x, w, b)) in NCHW;
                                         SHAPE is N,C,H,W,M,K,S,P: x
                                         [N, C, H, W], w [M, C, K, K],
                                         b [M], stride S, padding P on
                                         every side (DTYPE f32 or bf16)
`workloads.py --flops conv SHAPE` prints 2 N M OH OW C K K.
The ResNet-like shapes the benchmark runs are CONV_SHAPES below.
"""
import sys

WORKLOADS = ("relu", "gelu", "softmax", "layernorm")


def text(name, n, c):
    r = n // c
    t = f"tensor<{r}x{c}xf32>"
    v = f"tensor<{c}xf32>"
    if name == "relu":
        return (f"func.func @main(%x: {t}, %s: {v}, %b: {v}) -> {t} {{\n"
                f"  %0 = graph.mul %x, %s : {t}, {v} -> {t}\n"
                f"  %1 = graph.add %0, %b : {t}, {v} -> {t}\n"
                f"  %2 = graph.relu %1 : {t}\n"
                f"  return %2 : {t}\n}}\n")
    if name == "gelu":
        return (f"func.func @main(%x: {t}, %b: {v}) -> {t} {{\n"
                f"  %0 = graph.add %x, %b : {t}, {v} -> {t}\n"
                f"  %1 = graph.gelu %0 : {t}\n"
                f"  return %1 : {t}\n}}\n")
    # softmax and layer_norm are spelled in primitive ops, as exporters
    # write them: fused, fuse's pipeline makes one kernel of each; with
    # --no-fuse every op is its own loop nest.
    k = f"tensor<{r}x1xf32>"
    red = "{axes = array<i64: 1>, keepdims = true}"
    if name == "softmax":
        return (f"func.func @main(%x: {t}) -> {t} {{\n"
                f"  %m = graph.reduce_max %x {red} : {t} -> {k}\n"
                f"  %d = graph.sub %x, %m : {t}, {k} -> {t}\n"
                f"  %e = graph.exp %d : {t}\n"
                f"  %s = graph.reduce_sum %e {red} : {t} -> {k}\n"
                f"  %y = graph.div %e, %s : {t}, {k} -> {t}\n"
                f"  return %y : {t}\n}}\n")
    if name == "layernorm":
        return (f"func.func @main(%x: {t}, %r: {t}, %g: {v}, %b: {v}) -> {t} {{\n"
                f"  %eps = graph.constant dense<1.000000e-05> : tensor<f32>\n"
                f"  %h = graph.add %x, %r : {t}, {t} -> {t}\n"
                f"  %mu = graph.reduce_mean %h {red} : {t} -> {k}\n"
                f"  %d = graph.sub %h, %mu : {t}, {k} -> {t}\n"
                f"  %sq = graph.mul %d, %d : {t}, {t} -> {t}\n"
                f"  %var = graph.reduce_mean %sq {red} : {t} -> {k}\n"
                f"  %ve = graph.add %var, %eps : {k}, tensor<f32> -> {k}\n"
                f"  %sd = graph.sqrt %ve : {k}\n"
                f"  %n = graph.div %d, %sd : {t}, {k} -> {t}\n"
                f"  %y = graph.mul %n, %g : {t}, {v} -> {t}\n"
                f"  %z = graph.add %y, %b : {t}, {v} -> {t}\n"
                f"  return %z : {t}\n}}\n")
    raise SystemExit(f"workloads.py: unknown workload '{name}'")


def mm_text(m, k, n, dt="f32"):
    x, w = f"tensor<{m}x{k}x{dt}>", f"tensor<{k}x{n}x{dt}>"
    b, y = f"tensor<{n}x{dt}>", f"tensor<{m}x{n}x{dt}>"
    return (f"func.func @main(%x: {x}, %w: {w}, %b: {b}) -> {y} {{\n"
            f"  %0 = graph.matmul %x, %w : {x}, {w} -> {y}\n"
            f"  %1 = graph.add %0, %b : {y}, {b} -> {y}\n"
            f"  %2 = graph.gelu %1 : {y}\n"
            f"  return %2 : {y}\n}}\n")


# ResNet-50 convolutions at batch 1 (name, N,C,H,W,M,K,S,P): conv2_x's
# 3x3 and its 1x1 expansion, conv3_x's first 3x3 (stride 2), the stem.
CONV_SHAPES = (("3x3_64_56", "1,64,56,56,64,3,1,1"),
               ("1x1_64to256_56", "1,64,56,56,256,1,1,0"),
               ("3x3s2_128_56", "1,128,56,56,128,3,2,1"),
               ("7x7s2_stem", "1,3,224,224,64,7,2,3"))


def conv_shape(spec):
    n, c, h, w, m, k, s, p = (int(v) for v in spec.split(","))
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    return n, c, h, w, m, k, s, p, oh, ow


def conv_text(spec, dt="f32"):
    n, c, h, w, m, k, s, p, oh, ow = conv_shape(spec)
    x, wt = f"tensor<{n}x{c}x{h}x{w}x{dt}>", f"tensor<{m}x{c}x{k}x{k}x{dt}>"
    b, y = f"tensor<{m}x{dt}>", f"tensor<{n}x{m}x{oh}x{ow}x{dt}>"
    at = f"{{strides = array<i64: {s}, {s}>, pads = array<i64: {p}, {p}, {p}, {p}>}}"
    return (f"func.func @main(%x: {x}, %w: {wt}, %b: {b}) -> {y} {{\n"
            f"  %0 = graph.conv2d %x, %w, %b {at} : {x}, {wt}, {b} -> {y}\n"
            f"  %1 = graph.relu %0 : {y}\n"
            f"  return %1 : {y}\n}}\n")


def conv_flops(spec):
    n, c, h, w, m, k, s, p, oh, ow = conv_shape(spec)
    return 2 * n * m * oh * ow * c * k * k


def nbytes(name, n, c):
    full, vec = 4 * n, 4 * c
    return {"relu": 2 * full + 2 * vec, "gelu": 2 * full + vec,
            "softmax": 2 * full, "layernorm": 3 * full + 2 * vec}[name]


if __name__ == "__main__":
    args = sys.argv[1:]
    if "conv" in args:
        if args[0] == "--flops" and len(args) == 3:
            print(conv_flops(args[2]))
        elif args[0] == "conv" and len(args) in (2, 3):
            print(conv_text(args[1], *args[2:]), end="")
        else:
            raise SystemExit(__doc__)
        raise SystemExit(0)
    if args and args[-1] in ("f32", "bf16") and "mmgelu" in args:
        dt = args.pop()
    else:
        dt = "f32"
    if "mmgelu" in args:
        flops = args[0] == "--flops"
        rest = [int(a) for a in args[2 if flops else 1:]]
        if len(rest) not in (1, 3):
            raise SystemExit(__doc__)
        m, k, n = rest if len(rest) == 3 else rest * 3
        print(2 * m * k * n if flops else mm_text(m, k, n, dt), end="\n" if flops else "")
        raise SystemExit(0)
    want_bytes = args and args[0] == "--bytes"
    if want_bytes:
        args = args[1:]
    if len(args) not in (2, 3):
        raise SystemExit(__doc__)
    name, n = args[0], int(args[1])
    c = int(args[2]) if len(args) == 3 else 4096
    print(nbytes(name, n, c) if want_bytes else text(name, n, c), end="" if not want_bytes else "\n")
