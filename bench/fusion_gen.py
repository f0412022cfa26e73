#!/usr/bin/env python3
"""Random graph-dialect functions for the fusion pass's benchmark and tests.

    fusion_gen.py OPS [--seed S] [--rows B] [--cols N] [--window W]
                      [--permute P] [--no-matmul] [-o FILE]

Writes one func.func @main of about OPS graph ops on tensors of B x N f32:
elementwise chains, broadcasts of row and column vectors, row reductions
(keepdims), softmax and layer_norm composites, and matmuls with an N x N
weight. Each op takes its operands mostly from the last W values (the
locality of real models) and sometimes from anywhere before (long skip
connections). Values nobody uses are returned. Every value stays bounded
(tanh, sigmoid, safe divisions), so the interpreter never sees inf or NaN.

--permute P prints the same graph with its ops in another topological
order (a random one drawn from seed P): the fusion pass must give the same
result for every order.
"""
import argparse
import random
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ops", type=int)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rows", type=int, default=4)
    ap.add_argument("--cols", type=int, default=8)
    ap.add_argument("--window", type=int, default=8)
    ap.add_argument("--permute", type=int, default=None)
    ap.add_argument("--no-matmul", action="store_true")
    ap.add_argument("-o", dest="out", default="-")
    a = ap.parse_args()
    rnd = random.Random(a.seed)
    B, N = a.rows, a.cols
    full, row, col, mat = (f"tensor<{B}x{N}xf32>", f"tensor<{B}x1xf32>",
                           f"tensor<{N}xf32>", f"tensor<{N}x{N}xf32>")
    args = [("x0", full), ("x1", full), ("r0", row), ("b0", col),
            ("w0", mat)]
    # values: (name, kind) with kind in full/row; ops: (name, text, deps)
    vals = [("x0", "full"), ("x1", "full"), ("r0", "row")]
    ops = []
    uses = {}

    def pick(kind):
        cands = [v for v in vals[-a.window:] if v[1] == kind]
        if not cands or rnd.random() < 0.1:
            cands = [v for v in vals if v[1] == kind]
        return rnd.choice(cands)[0]

    def emit(name, text, deps, kind):
        ops.append((name, text, deps))
        for d in deps:
            uses[d] = uses.get(d, 0) + 1
        vals.append((name, kind))

    n = 0
    while len(ops) < a.ops:
        n += 1
        v = f"v{n}"
        r = rnd.random()
        if r < 0.30:
            op = rnd.choice(["tanh", "sigmoid", "relu", "neg", "abs"])
            kind = "full" if rnd.random() < 0.8 else "row"
            x = pick(kind)
            t = full if kind == "full" else row
            emit(v, f"%{v} = graph.{op} %{x} : {t}", [x], kind)
        elif r < 0.55:
            op = rnd.choice(["add", "mul", "sub", "max", "min"])
            x = pick("full")
            s = rnd.random()
            if s < 0.5:
                y = pick("full")
                emit(v, f"%{v} = graph.{op} %{x}, %{y} : {full}", [x, y],
                     "full")
            elif s < 0.8:
                y = pick("row")
                emit(v, f"%{v} = graph.{op} %{x}, %{y} : {full}, {row} -> "
                     f"{full}", [x, y], "full")
            else:
                emit(v, f"%{v} = graph.{op} %{x}, %b0 : {full}, {col} -> "
                     f"{full}", [x, "b0"], "full")
        elif r < 0.70:
            op = rnd.choice(["reduce_sum", "reduce_max", "reduce_mean"])
            x = pick("full")
            emit(v, f"%{v} = graph.{op} %{x} {{axes = array<i64: 1>, "
                 f"keepdims = true}} : {full} -> {row}", [x], "row")
        elif r < 0.78:
            # a safe division: x / (1 + |y|)
            x, y = pick("full"), pick("row")
            emit(v + "a", f"%{v}a = graph.abs %{y} : {row}", [y], "row")
            emit(v + "b", f"%{v}b = graph.add %{v}a, %one : {row}, "
                 f"tensor<1xf32> -> {row}", [v + "a", "one"], "row")
            emit(v, f"%{v} = graph.div %{x}, %{v}b : {full}, {row} -> {full}",
                 [x, v + "b"], "full")
        elif r < 0.86:
            x = pick("full")
            if rnd.random() < 0.5:
                emit(v, f"%{v} = graph.softmax %{x} : {full}", [x], "full")
            else:
                emit(v, f"%{v} = graph.layer_norm %{x} : {full}", [x], "full")
        elif not a.no_matmul:
            x = pick("full")
            emit(v + "m", f"%{v}m = graph.matmul %{x}, %w0 : {full}, {mat} -> "
                 f"{full}", [x, "w0"], "full")
            emit(v, f"%{v} = graph.tanh %{v}m : {full}", [v + "m"], "full")
    order = list(range(len(ops)))
    if a.permute is not None:
        prnd = random.Random(a.permute)
        index = {o[0]: i for i, o in enumerate(ops)}
        deps = [[index[d] for d in o[2] if d in index] for o in ops]
        users = [[] for _ in ops]
        indeg = [len(d) for d in deps]
        for i, d in enumerate(deps):
            for j in d:
                users[j].append(i)
        ready = [i for i in range(len(ops)) if indeg[i] == 0]
        order = []
        while ready:
            k = prnd.randrange(len(ready))
            ready[k], ready[-1] = ready[-1], ready[k]
            i = ready.pop()
            order.append(i)
            for u in users[i]:
                indeg[u] -= 1
                if indeg[u] == 0:
                    ready.append(u)
    results = [(o[0], kind) for o, (_, kind) in
               zip(ops, [v for v in vals if v[0] in {o[0] for o in ops}])
               if uses.get(o[0], 0) == 0]
    rtypes = [full if k == "full" else row for _, k in results]
    out = sys.stdout if a.out == "-" else open(a.out, "w")
    w = out.write
    w(f"// fusion_gen.py {a.ops} --seed {a.seed} --rows {B} --cols {N}"
      f"{' --permute %d' % a.permute if a.permute is not None else ''}\n")
    w("func.func @main(" + ", ".join(f"%{nm}: {t}" for nm, t in args) +
      ") -> (" + ", ".join(rtypes) + ") {\n")
    w("  %one = graph.constant dense<1.0> : tensor<1xf32>\n")
    for i in order:
        w("  " + ops[i][1] + "\n")
    w("  return " + ", ".join("%" + r for r, _ in results) + " : " +
      ", ".join(rtypes) + "\n}\n")
    if out is not sys.stdout:
        out.close()


if __name__ == "__main__":
    main()
