/* ir/hash128.c - a fast 128-bit hash for bulk data: the
 * MurmurHash3_x64_128 algorithm (Austin Appleby's, public domain),
 * written anew for little- and big-endian hosts alike (blocks are read
 * as little-endian words). The kernel cache hashes large constant data
 * (a model's weights, 100 MB for ResNet-50) and checks its payloads with
 * it: SHA-256 (sha256.c) runs at a few hundred MB/s, this at several
 * GB/s. It is no cryptographic hash: a cache entry is only as safe as
 * the folder it is in. Tested against SMHasher's verification value
 * (tests/unit/test_cache.c).
 */
#include <string.h>

#include "ir/cache.h"

static uint64_t rotl(uint64_t x, int r) {
  return (x << r) | (x >> (64 - r));
}

static uint64_t fmix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

static uint64_t load_le(const uint8_t *p) {
  uint64_t v;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  memcpy(&v, p, 8); /* one load */
#else
  v = 0;
  for (int i = 7; i >= 0; --i)
    v = v << 8 | p[i];
#endif
  return v;
}

void fzHash128(const void *data, size_t len, uint32_t seed,
               uint8_t out[FZ_HASH128_BYTES]) {
  const uint8_t *p = data;
  const uint64_t c1 = 0x87c37b91114253d5ULL, c2 = 0x4cf5ad432745937fULL;
  uint64_t h1 = seed, h2 = seed;
  size_t blocks = len / 16;
  for (size_t i = 0; i < blocks; ++i, p += 16) {
    uint64_t k1 = load_le(p), k2 = load_le(p + 8);
    k1 *= c1;
    k1 = rotl(k1, 31);
    k1 *= c2;
    h1 ^= k1;
    h1 = rotl(h1, 27);
    h1 += h2;
    h1 = h1 * 5 + 0x52dce729;
    k2 *= c2;
    k2 = rotl(k2, 33);
    k2 *= c1;
    h2 ^= k2;
    h2 = rotl(h2, 31);
    h2 += h1;
    h2 = h2 * 5 + 0x38495ab5;
  }
  size_t tail = len & 15;
  uint64_t k1 = 0, k2 = 0;
  for (size_t i = tail; i > 8; --i)
    k2 = k2 << 8 | p[i - 1];
  for (size_t i = tail < 8 ? tail : 8; i > 0; --i)
    k1 = k1 << 8 | p[i - 1];
  if (tail > 8) {
    k2 *= c2;
    k2 = rotl(k2, 33);
    k2 *= c1;
    h2 ^= k2;
  }
  if (tail) {
    k1 *= c1;
    k1 = rotl(k1, 31);
    k1 *= c2;
    h1 ^= k1;
  }
  h1 ^= (uint64_t)len;
  h2 ^= (uint64_t)len;
  h1 += h2;
  h2 += h1;
  h1 = fmix(h1);
  h2 = fmix(h2);
  h1 += h2;
  h2 += h1;
  for (int i = 0; i < 8; ++i) {
    out[i] = (uint8_t)(h1 >> (8 * i));
    out[8 + i] = (uint8_t)(h2 >> (8 * i));
  }
}
