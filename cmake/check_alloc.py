#!/usr/bin/env python3
"""cmake/check_alloc.py - the check that the library allocates through the
context (docs/api.md, "Allocation"; docs/architecture.md, "Memory").

    check_alloc.py ROOT

reads every .c and .h of the library's folders under ROOT (ir, dialects,
transforms, lowering, runtime, importers, pipelines) and fails (exit 1,
naming file, line and call) on a call of the C library's allocator --
malloc, calloc, realloc, free, strdup, strndup, aligned_alloc,
posix_memalign, reallocarray, asprintf, vasprintf -- unless the line
says why in a comment holding `plain-alloc:` (the default allocator,
memory of threads that never touch a context, memory a C library
function hands out). Comments and string literals are not code; a
member named like one of them (`a.realloc(...)`, `alloc->free(...)`) is
not the C library's.

    check_alloc.py --self-test

checks the check on a few lines: it must refuse a plain call and accept
the marked one, a member call, a longer name and a call in a comment or
a string.
"""
import os
import re
import sys

FOLDERS = ('ir', 'dialects', 'transforms', 'lowering', 'runtime',
           'importers', 'pipelines')
CALLS = ('malloc', 'calloc', 'realloc', 'free', 'strdup', 'strndup',
         'aligned_alloc', 'posix_memalign', 'reallocarray', 'asprintf',
         'vasprintf')
CALL = re.compile(r'(?<![\w.>])(' + '|'.join(CALLS) + r')\s*\(')
MARK = 'plain-alloc:'


def code_lines(text):
    """text's lines with comments and string/char literals blanked, and
    whether each line carries the marker in a comment."""
    out, marked = [], []
    cur, mark = [], False
    i, n = 0, len(text)
    state = None  # None, '/*', '//', '"', "'"
    comment = []
    while i < n:
        c = text[i]
        if c == '\n':
            if state == '//':
                mark |= MARK in ''.join(comment)
                comment, state = [], None
            elif state == '/*':
                mark |= MARK in ''.join(comment)
                comment = []
            out.append(''.join(cur))
            marked.append(mark)
            cur, mark = [], False
            i += 1
            continue
        if state is None:
            if text.startswith('/*', i):
                state, i = '/*', i + 2
                cur.append('  ')
                continue
            if text.startswith('//', i):
                state, i = '//', i + 2
                continue
            if c in '"\'':
                state = c
            cur.append(c)
        elif state in ('/*', '//'):
            if state == '/*' and text.startswith('*/', i):
                mark |= MARK in ''.join(comment)
                comment, state = [], None
                cur.append('  ')
                i += 2
                continue
            comment.append(c)
        else:  # in a literal
            if c == '\\':
                i += 2
                continue
            if c == state:
                state = None
                cur.append(c)
        i += 1
    if cur or comment:
        out.append(''.join(cur))
        marked.append(mark or MARK in ''.join(comment))
    return out, marked


def check_text(name, text):
    """The errors of one file's text."""
    errors = []
    lines, marked = code_lines(text)
    for no, (line, mark) in enumerate(zip(lines, marked), 1):
        for m in CALL.finditer(line):
            if not mark:
                errors.append('%s:%d: error: %s() is the C library\'s '
                              'allocator: allocate through the context '
                              '(ir/util.h: fzMalloc, fzCalloc, fzRealloc, '
                              'fzFree, fzStrDup), or say why not in a '
                              '"%s" comment on the line (docs/api.md, '
                              '"Allocation")' % (name, no, m.group(1), MARK))
    return errors


def check_tree(root):
    errors = []
    for folder in FOLDERS:
        for dirpath, _, files in sorted(os.walk(os.path.join(root, folder))):
            for f in sorted(files):
                if not f.endswith(('.c', '.h')):
                    continue
                path = os.path.join(dirpath, f)
                with open(path, encoding='utf-8') as fh:
                    errors += check_text(os.path.relpath(path, root),
                                         fh.read())
    return errors


def self_test():
    refused = ['  char *p = malloc(n);\n',
               '  free (p);\n',
               'x = strndup(s, n); /* a comment without the marker */\n',
               '/* plain-alloc: on the line before */\nfree(p);\n']
    accepted = ['  free(p); /* plain-alloc: realpath\'s */\n',
                '  void *q = a.realloc(u, p, 0, n);\n',
                '  ctx->alloc.free(p);\n',
                '  fzFree(ctx, p); my_malloc(3); freelist(x);\n',
                '/* we never call malloc(n) here */\n',
                '/* spans\n * free(p) lines */\n',
                '  puts("free(p)"); c = \'"\'; d = malloc_usable;\n',
                '// free(p)\n']
    bad = False
    for t in refused:
        if not check_text('t.c', t):
            print('self-test: not refused: %r' % t)
            bad = True
    for t in accepted:
        e = check_text('t.c', t)
        if e:
            print('self-test: refused: %r: %s' % (t, e[0]))
            bad = True
    return 1 if bad else 0


def main(argv):
    if argv[1:] == ['--self-test']:
        return self_test()
    if len(argv) != 2:
        print(__doc__)
        return 2
    errors = check_tree(argv[1])
    for e in errors:
        print(e)
    if errors:
        print('check_alloc: %d plain allocation call(s)' % len(errors))
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
