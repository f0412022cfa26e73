/* scale_dialect.h - what the embedding example adds to fuse from C.
 *
 * The "emb" dialect holds one op, emb.scale (a tensor times a constant
 * factor), with its traits, verify/fold/print/parse hooks and a
 * canonicalization pattern; the pass emb-expand-scale rewrites every
 * emb.scale into graph ops so that fuse's own passes, interpreter and code
 * generators can take over. Everything is static data plus callbacks: an
 * embedder extends fuse without touching fuse's sources.
 */
#ifndef EMBED_SCALE_DIALECT_H
#define EMBED_SCALE_DIALECT_H

#include <fz/fz.h>

/* Registers the emb dialect and the emb-expand-scale pass into ctx, so
 * that the parser knows emb.scale and textual pipelines know the pass.
 * False after fuse has reported why (as a diagnostic). */
bool embRegister(FzContext *ctx);

#endif /* EMBED_SCALE_DIALECT_H */
