/* ir/lexer.c - the tokenizer of fuse's textual format.
 *
 * One pass over a NUL-terminated buffer, one token at a time, no
 * allocation: tokens are (kind, pointer, length, line, column). The
 * buffer's end is known from its length, so a NUL byte inside the text is
 * an invalid character rather than the end. Reading one byte past a
 * position that is before `end` is always safe because buf[len] is NUL.
 *
 * Token grammar (MLIR's):
 *   bare-id    ::= [a-zA-Z_][a-zA-Z0-9_$.]*
 *   suffix-id  ::= [0-9]+ | [a-zA-Z_$.-][a-zA-Z0-9_$.-]*
 *   %suffix-id  ^suffix-id  #suffix-id  !suffix-id  @bare-id  @"string"
 *   integer    ::= [0-9]+ | 0x[0-9a-fA-F]+
 *   float      ::= [0-9]+ '.' [0-9]* ([eE][+-]?[0-9]+)? | [0-9]+ [eE][+-]?[0-9]+
 *   string     ::= '"' ([^"\\\n] | '\' ["\\nt] | '\' hex hex)* '"'
 *   comment    ::= '//' to the end of the line
 */
#include "ir/lexer.h"

#include <string.h>

static int is_alpha(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static int is_digit(int c) { return c >= '0' && c <= '9'; }
static int is_hex(int c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
static int is_bare_char(int c) {
  return is_alpha(c) || is_digit(c) || c == '_' || c == '$' || c == '.';
}
static int is_suffix_char(int c) {
  return is_alpha(c) || is_digit(c) || c == '_' || c == '$' || c == '.' ||
         c == '-';
}

void fzLexerInit(FzLexer *lx, const char *buf, size_t len) {
  lx->buf = buf;
  lx->cur = buf;
  lx->end = buf + len;
  lx->lineStart = buf;
  lx->line = 1;
  lx->braceDepth = 0;
  lx->errMsg = NULL;
}

static void form(FzLexer *lx, FzToken *tok, FzTokKind kind, const char *start) {
  tok->kind = kind;
  tok->start = start;
  tok->len = (size_t)(lx->cur - start);
  tok->line = lx->line;
  tok->col = (uint32_t)(start - lx->lineStart) + 1;
}

static void form_error(FzLexer *lx, FzToken *tok, const char *start,
                       const char *msg) {
  lx->errMsg = msg;
  form(lx, tok, FZ_TOK_ERROR, start);
}

/* Skips whitespace and comments; stops at the first byte of a token. */
static void skip_trivia(FzLexer *lx) {
  const char *p = lx->cur;
  for (;;) {
    char c = *p;
    if (c == ' ' || c == '\t' || c == '\r') {
      ++p;
    } else if (c == '\n') {
      ++p;
      ++lx->line;
      lx->lineStart = p;
    } else if (c == '/' && p[1] == '/') {
      p += 2;
      while (p < lx->end && *p != '\n')
        ++p;
    } else {
      break;
    }
  }
  lx->cur = p;
}

/* After the prefix character of %, ^, #, !: a suffix-id. */
static void lex_prefixed(FzLexer *lx, FzToken *tok, FzTokKind kind,
                         const char *start) {
  const char *p = lx->cur;
  if (is_digit(*p)) {
    while (is_digit(*p))
      ++p;
  } else if (is_alpha(*p) || *p == '_' || *p == '$' || *p == '.' ||
             *p == '-') {
    while (is_suffix_char(*p))
      ++p;
  } else {
    lx->cur = p;
    const char *msg = "invalid identifier";
    if (kind == FZ_TOK_PERCENT_IDENT)
      msg = "invalid SSA name";
    else if (kind == FZ_TOK_CARET_IDENT)
      msg = "invalid block name";
    form_error(lx, tok, start, msg);
    return;
  }
  lx->cur = p;
  form(lx, tok, kind, start);
}

/* The body of a string literal; lx->cur is just past the opening quote.
 * Reports a located error token at the offending byte. */
static void lex_string(FzLexer *lx, FzToken *tok, const char *start,
                       FzTokKind kind) {
  const char *p = lx->cur;
  for (;;) {
    if (p >= lx->end) {
      lx->cur = p;
      form_error(lx, tok, p, "unexpected end of file in string literal");
      tok->len = 0;
      return;
    }
    char c = *p;
    if (c == '"') {
      lx->cur = p + 1;
      form(lx, tok, kind, start);
      return;
    }
    if (c == '\n' || c == '\v' || c == '\f') {
      lx->cur = p; /* the newline is lexed normally afterwards */
      form_error(lx, tok, p, "expected '\"' in string literal");
      tok->len = 0;
      return;
    }
    if (c == '\\') {
      char e = p[1];
      if (p + 1 < lx->end &&
          (e == '"' || e == '\\' || e == 'n' || e == 't')) {
        p += 2;
        continue;
      }
      if (p + 2 < lx->end && is_hex(e) && is_hex(p[2])) {
        p += 3;
        continue;
      }
      /* Resume after the rest of the literal so that its contents are
       * not lexed as tokens. */
      const char *q = p + 1;
      while (q < lx->end && *q != '"' && *q != '\n')
        q += (*q == '\\' && q + 1 < lx->end) ? 2 : 1;
      lx->cur = (q < lx->end && *q == '"') ? q + 1 : q;
      form_error(lx, tok, p, "unknown escape in string literal");
      tok->len = 1;
      return;
    }
    ++p;
  }
}

static void lex_number(FzLexer *lx, FzToken *tok, const char *start) {
  const char *p = start;
  if (p[0] == '0' && p[1] == 'x' && is_hex(p[2])) {
    p += 2;
    while (is_hex(*p))
      ++p;
    lx->cur = p;
    form(lx, tok, FZ_TOK_INTEGER, start);
    return;
  }
  while (is_digit(*p))
    ++p;
  FzTokKind kind = FZ_TOK_INTEGER;
  if (*p == '.') {
    kind = FZ_TOK_FLOAT;
    ++p;
    while (is_digit(*p))
      ++p;
  }
  if ((*p == 'e' || *p == 'E') &&
      (is_digit(p[1]) ||
       ((p[1] == '+' || p[1] == '-') && is_digit(p[2])))) {
    kind = FZ_TOK_FLOAT;
    p += 2;
    while (is_digit(*p))
      ++p;
  }
  lx->cur = p;
  form(lx, tok, kind, start);
}

void fzLexerNext(FzLexer *lx, FzToken *tok) {
  skip_trivia(lx);
  const char *start = lx->cur;
  if (start >= lx->end) {
    lx->cur = lx->end;
    form(lx, tok, FZ_TOK_EOF, lx->end);
    return;
  }
  unsigned char c = (unsigned char)*start;
  lx->cur = start + 1;
  switch (c) {
  case '(':
    form(lx, tok, FZ_TOK_LPAREN, start);
    return;
  case ')':
    form(lx, tok, FZ_TOK_RPAREN, start);
    return;
  case '[':
    form(lx, tok, FZ_TOK_LSQUARE, start);
    return;
  case ']':
    form(lx, tok, FZ_TOK_RSQUARE, start);
    return;
  case '{':
    ++lx->braceDepth;
    form(lx, tok, FZ_TOK_LBRACE, start);
    return;
  case '}':
    --lx->braceDepth;
    form(lx, tok, FZ_TOK_RBRACE, start);
    return;
  case '<':
    form(lx, tok, FZ_TOK_LESS, start);
    return;
  case '>':
    form(lx, tok, FZ_TOK_GREATER, start);
    return;
  case ',':
    form(lx, tok, FZ_TOK_COMMA, start);
    return;
  case ':':
    form(lx, tok, FZ_TOK_COLON, start);
    return;
  case '=':
    form(lx, tok, FZ_TOK_EQUAL, start);
    return;
  case '?':
    form(lx, tok, FZ_TOK_QUESTION, start);
    return;
  case '*':
    form(lx, tok, FZ_TOK_STAR, start);
    return;
  case '+':
    form(lx, tok, FZ_TOK_PLUS, start);
    return;
  case '-':
    if (*lx->cur == '>') {
      ++lx->cur;
      form(lx, tok, FZ_TOK_ARROW, start);
    } else {
      form(lx, tok, FZ_TOK_MINUS, start);
    }
    return;
  case '.':
    if (lx->cur[0] == '.' && lx->cur[1] == '.') {
      lx->cur += 2;
      form(lx, tok, FZ_TOK_ELLIPSIS, start);
      return;
    }
    break;
  case '"':
    lex_string(lx, tok, start, FZ_TOK_STRING);
    return;
  case '%':
    lex_prefixed(lx, tok, FZ_TOK_PERCENT_IDENT, start);
    return;
  case '^':
    lex_prefixed(lx, tok, FZ_TOK_CARET_IDENT, start);
    return;
  case '#':
    lex_prefixed(lx, tok, FZ_TOK_HASH_IDENT, start);
    return;
  case '!':
    lex_prefixed(lx, tok, FZ_TOK_EXCL_IDENT, start);
    return;
  case '@':
    if (*lx->cur == '"') {
      ++lx->cur;
      lex_string(lx, tok, start, FZ_TOK_AT_IDENT);
      return;
    }
    if (is_alpha(*lx->cur) || *lx->cur == '_') {
      const char *p = lx->cur;
      while (is_bare_char(*p))
        ++p;
      lx->cur = p;
      form(lx, tok, FZ_TOK_AT_IDENT, start);
      return;
    }
    form_error(lx, tok, start, "invalid symbol reference");
    return;
  default:
    break;
  }
  if (is_alpha(c) || c == '_') {
    const char *p = lx->cur;
    while (is_bare_char(*p))
      ++p;
    lx->cur = p;
    form(lx, tok, FZ_TOK_BARE_IDENT, start);
    return;
  }
  if (is_digit(c)) {
    lex_number(lx, tok, start);
    return;
  }
  form_error(lx, tok, start, "invalid character");
}

void fzLexerResetTo(FzLexer *lx, const char *ptr) { lx->cur = ptr; }

const char fzLexerNestingTooDeep[] = "nesting too deep";

void fzLexerGetLineCol(const FzLexer *lx, const char *ptr, uint32_t *line,
                       uint32_t *col) {
  uint32_t l = lx->line;
  const char *ls = lx->lineStart;
  if (ptr >= ls) {
    for (const char *q = ls; q < ptr; ++q)
      if (*q == '\n') {
        ++l;
        ls = q + 1;
      }
  } else {
    for (const char *q = ls; q > ptr; --q)
      if (q[-1] == '\n')
        --l;
    ls = ptr;
    while (ls > lx->buf && ls[-1] != '\n')
      --ls;
  }
  *line = l;
  *col = (uint32_t)(ptr - ls) + 1;
}

const char *fzLexerScanPrettyBody(FzLexer *lx, const char *ptr,
                                  unsigned maxDepth, const char **errPtr,
                                  const char **errMsg) {
  /* A small stack of open brackets; nesting past maxDepth is an error,
   * so a bounded buffer suffices for the common case and the rest is
   * tracked by count only when all opens are of one kind. To stay exact
   * we keep the stack in a local array and refuse deeper input. */
  char stack[512];
  unsigned cap = maxDepth < sizeof stack ? maxDepth : (unsigned)sizeof stack;
  unsigned depth = 0;
  const char *p = ptr;
  const char *lineStart = lx->lineStart;
  uint32_t line = lx->line;
  for (;;) {
    if (p >= lx->end) {
      *errPtr = ptr;
      *errMsg = "unbalanced '<' character in pretty dialect name";
      return NULL;
    }
    char c = *p++;
    switch (c) {
    case '<':
    case '[':
    case '{':
    case '(':
      if (depth >= cap) {
        *errPtr = p - 1;
        *errMsg = fzLexerNestingTooDeep;
        return NULL;
      }
      stack[depth++] = c;
      break;
    case '>':
    case ']':
    case '}':
    case ')': {
      char open = c == '>' ? '<' : c == ']' ? '[' : c == '}' ? '{' : '(';
      if (depth == 0 || stack[depth - 1] != open) {
        *errPtr = p - 1;
        switch (c) {
        case '>':
          *errMsg = "unbalanced '>' character in pretty dialect name";
          break;
        case ']':
          *errMsg = "unbalanced ']' character in pretty dialect name";
          break;
        case '}':
          *errMsg = "unbalanced '}' character in pretty dialect name";
          break;
        default:
          *errMsg = "unbalanced ')' character in pretty dialect name";
          break;
        }
        return NULL;
      }
      --depth;
      if (depth == 0) {
        lx->cur = p;
        lx->line = line;
        lx->lineStart = lineStart;
        return p;
      }
      break;
    }
    case '-':
      if (*p == '>')
        ++p;
      break;
    case '"':
      while (p < lx->end && *p != '"' && *p != '\n') {
        if (*p == '\\' && p + 1 < lx->end)
          ++p;
        ++p;
      }
      if (p >= lx->end || *p != '"') {
        *errPtr = p;
        *errMsg = "expected '\"' in string literal";
        return NULL;
      }
      ++p;
      break;
    case '\n':
      ++line;
      lineStart = p;
      break;
    case '\0':
      *errPtr = p - 1;
      *errMsg = "invalid character";
      return NULL;
    default:
      break;
    }
  }
}
