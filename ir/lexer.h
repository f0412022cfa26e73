/* ir/lexer.h - the tokenizer of fuse's textual format (MLIR's syntax).
 *
 * Private to ir/. The lexer walks a NUL-terminated buffer that outlives
 * it (the context's copy of the source) and hands out tokens that point
 * into that buffer: no token allocates. Every token knows its line and
 * byte column (1-based; the line offset of split files is added by the
 * parser when it builds a location). Bad input never stops the lexer: an
 * invalid byte, a broken string or an unknown escape gives an ERROR token
 * carrying a static message, after which lexing goes on past it.
 */
#ifndef FZ_IR_LEXER_H
#define FZ_IR_LEXER_H

#include <stddef.h>
#include <stdint.h>

typedef enum FzTokKind {
  FZ_TOK_EOF,
  FZ_TOK_ERROR,         /* message in FzLexer.errMsg */
  FZ_TOK_BARE_IDENT,    /* [a-zA-Z_][a-zA-Z0-9_$.]* */
  FZ_TOK_PERCENT_IDENT, /* %name, %0 */
  FZ_TOK_CARET_IDENT,   /* ^bb0 */
  FZ_TOK_AT_IDENT,      /* @name or @"quoted" */
  FZ_TOK_HASH_IDENT,    /* #alias, #dialect.x, #1 */
  FZ_TOK_EXCL_IDENT,    /* !dialect.type, !alias */
  FZ_TOK_INTEGER,       /* 42, 0x2A */
  FZ_TOK_FLOAT,         /* 1.5, 1e-3, 2. */
  FZ_TOK_STRING,        /* "text" with escapes, quotes included */
  FZ_TOK_LPAREN,
  FZ_TOK_RPAREN,
  FZ_TOK_LSQUARE,
  FZ_TOK_RSQUARE,
  FZ_TOK_LBRACE,
  FZ_TOK_RBRACE,
  FZ_TOK_LESS,
  FZ_TOK_GREATER,
  FZ_TOK_COMMA,
  FZ_TOK_COLON,
  FZ_TOK_EQUAL,
  FZ_TOK_ARROW,
  FZ_TOK_QUESTION,
  FZ_TOK_STAR,
  FZ_TOK_PLUS,
  FZ_TOK_MINUS,
  FZ_TOK_ELLIPSIS,
} FzTokKind;

typedef struct FzToken {
  FzTokKind kind;
  uint32_t line;     /* 1-based, without the parser's line offset */
  uint32_t col;      /* 1-based byte column */
  const char *start; /* into the buffer */
  size_t len;
} FzToken;

typedef struct FzLexer {
  const char *buf;       /* start of the buffer */
  const char *cur;       /* next byte to read */
  const char *end;       /* buf + length; *end == '\0' */
  const char *lineStart; /* first byte of the current line */
  uint32_t line;
  int braceDepth;        /* '{' minus '}' lexed so far (error recovery) */
  const char *errMsg;    /* message of the last ERROR token */
} FzLexer;

/* buf[len] must be '\0' (the context's copies are). */
void fzLexerInit(FzLexer *lx, const char *buf, size_t len);

/* Lexes the next token into *tok. At the end of the buffer returns EOF
 * forever. */
void fzLexerNext(FzLexer *lx, FzToken *tok);

/* Moves the read position back to `ptr`, which must lie on the line of
 * the last token lexed, inside or at the end of that token (used to split
 * "4xf32" in dimension lists). */
void fzLexerResetTo(FzLexer *lx, const char *ptr);

/* The message of a pretty body nested past maxDepth (compared by
 * pointer, so the parser can state its limit). */
extern const char fzLexerNestingTooDeep[];

/* Scans a pretty dialect body starting at `ptr` (which must be '<') up to
 * its balanced closing '>', skipping strings and "->". On success returns
 * the pointer after the '>' and moves the read position there (line
 * counting included). On failure returns NULL and sets *errPtr and *errMsg
 * (an unbalanced bracket, the end of the buffer, or nesting past
 * maxDepth). */
const char *fzLexerScanPrettyBody(FzLexer *lx, const char *ptr,
                                  unsigned maxDepth, const char **errPtr,
                                  const char **errMsg);

/* Line and 1-based column of any pointer into the buffer (linear in the
 * distance from the current line; meant for diagnostics). */
void fzLexerGetLineCol(const FzLexer *lx, const char *ptr, uint32_t *line,
                       uint32_t *col);

#endif /* FZ_IR_LEXER_H */
