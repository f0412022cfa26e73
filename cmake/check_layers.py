#!/usr/bin/env python3
"""cmake/check_layers.py - the build's check that calls between layers
point the way docs/architecture.md says.

    check_layers.py --nm NM --headers include/fz \\
        --layer NAME --calls=A,B --public-calls=C,D OBJ... [--layer ...]

Each layer lists its object files. A function (or variable) that an
object of layer L uses and another layer M defines must be one that L may
reach: M is in L's --calls (anything of M), or M is in L's
--public-calls and the symbol is part of the exported API (declared with
FZ_API in include/fz). Anything else is an error naming the object, the
symbol and where it is defined; the build stops (exit 1).

    check_layers.py --nm NM --headers include/fz --exports libfuse.so

checks instead that the shared library exports exactly the API: every
FZ_API declaration, and nothing else (a test of the suite runs it).

    check_layers.py --self-test CC

compiles a lower and an upper layer and checks that the check accepts a
call through the API and refuses one into a layer's internals.
"""
import argparse
import os
import re
import subprocess
import sys


def api_symbols(headers):
    """Names declared with FZ_API in the public headers."""
    names = set()
    decl = re.compile(r'\bFZ_API\b[^;{]*?\b([A-Za-z_]\w*)\s*(\(|;|\[)')
    for f in sorted(os.listdir(headers)):
        if not f.endswith('.h'):
            continue
        text = open(os.path.join(headers, f), encoding='utf-8').read()
        text = re.sub(r'/\*.*?\*/', ' ', text, flags=re.S)
        text = re.sub(r'#define[^\n]*', ' ', text)
        for m in decl.finditer(text):
            names.add(m.group(1))
    return names


def parse(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument('--nm', default='nm')
    ap.add_argument('--headers', required=True)
    head, rest = [], []
    i = 0
    while i < len(argv) and argv[i] != '--layer':
        head.append(argv[i])
        i += 1
    args = ap.parse_args(head)
    layers = []
    cur = None
    for a in argv[i:]:
        if a == '--layer':
            cur = {'name': None, 'calls': set(), 'public': set(), 'objs': []}
            layers.append(cur)
        elif cur is not None and cur['name'] is None:
            cur['name'] = a
        elif a.startswith('--calls='):
            cur['calls'] = {x for x in a[8:].split(',') if x}
        elif a.startswith('--public-calls='):
            cur['public'] = {x for x in a[15:].split(',') if x}
        else:
            cur['objs'].append(a)
    return args, layers


def short(obj):
    """The source path of a CMake object file (.../x.dir/a/b.c.o -> a/b.c)."""
    m = re.search(r'\.dir/(.*)\.o$', obj)
    return m.group(1) if m else obj


# What every ELF shared library defines besides its own symbols.
LINKER_SYMBOLS = {'__bss_start', '_edata', '_end', '_init', '_fini'}


def check_exports(nm, headers, lib):
    api = api_symbols(headers)
    out = subprocess.run([nm, '-D', '--defined-only', '-P', lib],
                         capture_output=True, text=True, check=True).stdout
    exported = {l.split()[0] for l in out.splitlines() if l.split()}
    exported -= LINKER_SYMBOLS
    extra = sorted(exported - api)
    missing = sorted(api - exported)
    for s in extra:
        print(f'error: {lib} exports {s}, which include/fz does not declare '
              'with FZ_API', file=sys.stderr)
    for s in missing:
        print(f'error: include/fz declares {s} (FZ_API) but {lib} does not '
              'export it', file=sys.stderr)
    print(f'exports: {len(exported)} symbols, API: {len(api)} declarations, '
          f'{len(extra)} extra, {len(missing)} missing')
    return 1 if extra or missing else 0


def self_test(cc):
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        files = {
            'low.c': 'int fzLowInternal(void) { return 1; }\n'
                     'int fzLowApi(void) { return 2; }\n',
            'up_ok.c': 'int fzLowApi(void);\n'
                       'int fzUpOk(void) { return fzLowApi(); }\n',
            'up_bad.c': 'int fzLowInternal(void);\n'
                        'int fzUpBad(void) { return fzLowInternal(); }\n',
            'api.h': '#define FZ_API\nFZ_API int fzLowApi(void);\n',
        }
        for name, text in files.items():
            with open(os.path.join(d, name), 'w') as f:
                f.write(text)
        for name in ('low', 'up_ok', 'up_bad'):
            subprocess.run([cc, '-c', os.path.join(d, name + '.c'), '-o',
                            os.path.join(d, name + '.o')], check=True)
        me = os.path.abspath(__file__)

        def run(upper, public):
            return subprocess.run(
                [sys.executable, me, '--headers', d, '--layer', 'low',
                 '--calls=', '--public-calls=', os.path.join(d, 'low.o'),
                 '--layer', 'up', '--calls=',
                 '--public-calls=' + ('low' if public else ''),
                 os.path.join(d, upper + '.o')],
                capture_output=True, text=True)
        cases = [('up_ok', True, 0, ''),
                 ('up_bad', True, 1, 'calls fzLowInternal of'),
                 ('up_ok', False, 1, 'up/ may call low/ not at all')]
        bad = 0
        for upper, public, rc, text in cases:
            r = run(upper, public)
            ok = r.returncode == rc and text in r.stderr
            print(f'{"ok" if ok else "FAIL"}: {upper}, public={public}: '
                  f'rc {r.returncode}{": " + r.stderr.strip() if r.stderr else ""}')
            bad += not ok
        return 1 if bad else 0


def main():
    if len(sys.argv) == 3 and sys.argv[1] == '--self-test':
        return self_test(sys.argv[2])
    if '--exports' in sys.argv:
        ap = argparse.ArgumentParser()
        ap.add_argument('--nm', default='nm')
        ap.add_argument('--headers', required=True)
        ap.add_argument('--exports', required=True)
        a = ap.parse_args()
        return check_exports(a.nm, a.headers, a.exports)
    args, layers = parse(sys.argv[1:])
    api = api_symbols(args.headers)
    defined = {}  # symbol -> (layer, object)
    uses = []     # (layer, object, symbol)
    for L in layers:
        if not L['objs']:
            continue
        out = subprocess.run([args.nm, '-P', '-A'] + L['objs'],
                             capture_output=True, text=True,
                             check=True).stdout
        for line in out.splitlines():
            # "path/x.c.o: symbol TYPE [value size]"
            obj, _, rest = line.partition(': ')
            parts = rest.split()
            if len(parts) < 2:
                continue
            sym, kind = parts[0], parts[1]
            if kind == 'U':
                uses.append((L['name'], obj, sym))
            elif kind in 'TDBRVWCG' and kind.isupper():
                defined.setdefault(sym, (L['name'], obj))
    rules = {L['name']: L for L in layers}
    errors = []
    for layer, obj, sym in uses:
        if sym not in defined:
            continue  # libc, LLVM, protobuf-c, ...
        dlayer, dobj = defined[sym]
        if dlayer == layer:
            continue
        R = rules[layer]
        if dlayer in R['calls']:
            continue
        if dlayer in R['public'] and sym in api:
            continue
        why = ('only through include/fz (FZ_API)' if dlayer in R['public']
               else 'not at all')
        errors.append(f'{short(obj)}: calls {sym} of {short(dobj)}: '
                      f'{layer}/ may call {dlayer}/ {why} '
                      '(docs/architecture.md)')
    for e in sorted(set(errors)):
        print('error: layer check: ' + e, file=sys.stderr)
    if errors:
        print(f'layer check: {len(set(errors))} forbidden calls',
              file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
