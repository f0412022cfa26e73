/* Calls the function @scale that translate.fuse compiles to an object
 * file with fuse-translate --emit=obj, through the ABI of fz/lowering.h:
 * one pointer per buffer (16-byte aligned), then the runtime pointer,
 * NULL here (the function then runs on the calling thread). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

void scale(const float *x, const float *s, float *out, const void *rt);

int main(void) {
  enum { R = 37, C = 129 };
  float *x = aligned_alloc(64, 64 * ((R * C * 4 + 63) / 64));
  float *s = aligned_alloc(64, 64 * ((C * 4 + 63) / 64));
  float *out = aligned_alloc(64, 64 * ((R * C * 4 + 63) / 64));
  for (int i = 0; i < R * C; ++i)
    x[i] = (float)((i % 17) - 8) * 0.25f;
  for (int j = 0; j < C; ++j)
    s[j] = 1.0f + (float)j / 64.0f;
  scale(x, s, out, NULL);
  int bad = 0;
  for (int i = 0; i < R * C; ++i) {
    float v = x[i] * s[i % C];
    float want = v > 0 ? v : 0;
    if (fabsf(out[i] - want) > 1e-6f * fabsf(want))
      bad++;
  }
  printf("call_object: %d of %d elements wrong\n", bad, R * C);
  free(x);
  free(s);
  free(out);
  return bad != 0;
}
