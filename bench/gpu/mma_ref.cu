// bench/gpu/mma_ref.cu - a hand-written CUDA C++ GEMM + bias + gelu of the
// SAME design as the kernels lower-loop-to-kernel generates for matmuls
// (lowering/loop_to_kernel/matmul.c; docs/codegen.md "Tensor-core
// matmul"), so that the generated kernel can be compared, in one run on
// the GPU machine, with a hand-written one of its own tiling and with
// cuBLAS:
//   - C[M][N] = gelu(A[M][K] @ B[K][N] + bias[N]), bf16 in and out, f32
//     accumulators, exact gelu 0.5 x (1 + erf(x / sqrt 2));
//   - one block per BM x BN tile in grouped order (GROUP_M rows of tiles
//     walk the columns together), WARPS_M x WARPS_N warps;
//   - a STAGES-deep ring of shared-memory stages filled by cp.async.cg
//     (16 bytes, zero-fill past the edges through the source size), one
//     __syncthreads per BK step: wait_group STAGES-2, barrier, refill the
//     stage the barrier freed, commit, compute;
//   - tiles with 16-byte chunks XOR-swizzled per row, ldmatrix.x4 for A
//     (k-contiguous) and ldmatrix.x4.trans for B (n-contiguous),
//     mma.sync.m16n8k16 bf16 -> f32;
//   - the epilogue per accumulator pair in registers, one 4-byte
//     bf16x2 store per pair.
// Build and run (bench/gpu/run.sh does it):
//   nvcc -O3 -arch=sm_90 -std=c++17 bench/gpu/mma_ref.cu -o mma_ref \
//        [-DWITH_CUBLAS -lcublas]
//   ./mma_ref [M N K] [reps]          (default 4096 4096 4096, 20)
// Prints, per configuration: the tile, the median time, TFLOP/s (2MNK /
// time), and the largest error against a naive f32 GPU reference on a
// sample of 4096 outputs (in bf16 units of the output's magnitude). With
// WITH_CUBLAS, cuBLAS's bf16 GEMM alone (no epilogue) as the limit.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
#ifdef WITH_CUBLAS
#include <cublas_v2.h>
#endif

#define CHECK(x)                                                              \
  do {                                                                        \
    cudaError_t e_ = (x);                                                     \
    if (e_ != cudaSuccess) {                                                  \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,         \
                   cudaGetErrorString(e_));                                   \
      std::exit(1);                                                           \
    }                                                                         \
  } while (0)

typedef __nv_bfloat16 bf16;

// The swizzled element offset of (row, col) in a tile of COLS columns, col
// a multiple of 8: 16-byte chunk c of row r goes to c ^ f(r), so that the
// 8 rows one ldmatrix phase reads fall in 8 different bank groups.
template <int COLS>
__device__ __forceinline__ int swz(int row, int col) {
  constexpr int C = COLS / 8;
  int chunk = col / 8;
  int f = C >= 8 ? row % 8 : (row / (8 / C)) % C;
  return row * COLS + ((chunk ^ f) * 8);
}

__device__ __forceinline__ uint32_t smem_u32(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src,
                                           int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst),
               "l"(src), "r"(bytes));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t *r, uint32_t addr) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t *r, uint32_t addr) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, "
      "[%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(addr));
}

__device__ __forceinline__ void mma_bf16(float *d, const uint32_t *a,
                                         const uint32_t *b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES,
          int GROUP_M>
__global__ void __launch_bounds__(WARPS_M *WARPS_N * 32)
    gemm_bias_gelu(const bf16 *__restrict__ A, const bf16 *__restrict__ B,
                   const bf16 *__restrict__ bias, bf16 *__restrict__ C, int M,
                   int N, int K) {
  constexpr int T = WARPS_M * WARPS_N * 32;
  constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
  constexpr int MT = WM / 16, NT = WN / 8;
  constexpr int A_CHUNKS = BM * BK / 8 / T, B_CHUNKS = BK * BN / 8 / T;
  static_assert(BM * BK / 8 % T == 0 && BK * BN / 8 % T == 0, "chunks");
  static_assert(NT % 2 == 0 && WM % 16 == 0, "warp tile");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16 *sA = reinterpret_cast<bf16 *>(smem_raw);
  bf16 *sB = sA + STAGES * BM * BK;

  // Grouped launch order (Triton's).
  int tilesM = (M + BM - 1) / BM, tilesN = (N + BN - 1) / BN;
  int pid = blockIdx.x, inGroup = GROUP_M * tilesN;
  int first = pid / inGroup * GROUP_M;
  int size = min(tilesM - first, GROUP_M);
  int pidM = first + (pid % inGroup) % size, pidN = (pid % inGroup) / size;
  int m0 = pidM * BM, n0 = pidN * BN;

  int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  int wm = warp / WARPS_N, wn = warp % WARPS_N;

  // This thread's chunks: A tile [BM][BK] (k contiguous), B tile [BK][BN]
  // (n contiguous).
  int aDst[A_CHUNKS], aRow[A_CHUNKS], aCol[A_CHUNKS];
  int bDst[B_CHUNKS], bRow[B_CHUNKS], bCol[B_CHUNKS];
#pragma unroll
  for (int p = 0; p < A_CHUNKS; ++p) {
    int c = tid + p * T, r = c / (BK / 8), cc = c % (BK / 8) * 8;
    aDst[p] = swz<BK>(r, cc);
    aRow[p] = m0 + r;
    aCol[p] = cc;
  }
#pragma unroll
  for (int p = 0; p < B_CHUNKS; ++p) {
    int c = tid + p * T, r = c / (BN / 8), cc = c % (BN / 8) * 8;
    bDst[p] = swz<BN>(r, cc);
    bRow[p] = r;
    bCol[p] = n0 + cc;
  }
  auto load_tile = [&](int kt, int stage) {
    int k0 = kt * BK;
#pragma unroll
    for (int p = 0; p < A_CHUNKS; ++p) {
      int row = aRow[p], k = k0 + aCol[p];
      bool ok = row < M && k < K;
      const bf16 *src = A + (size_t)min(row, M - 1) * K + min(k, K - 8);
      cp_async16(smem_u32(sA + stage * BM * BK + aDst[p]), src, ok ? 16 : 0);
    }
#pragma unroll
    for (int p = 0; p < B_CHUNKS; ++p) {
      int k = k0 + bRow[p], col = bCol[p];
      bool ok = k < K && col < N;
      const bf16 *src = B + (size_t)min(k, K - 1) * N + min(col, N - 8);
      cp_async16(smem_u32(sB + stage * BK * BN + bDst[p]), src, ok ? 16 : 0);
    }
  };

  // ldmatrix offsets within a stage: this lane's offset of the first
  // fragment; fragment (ks, i) is at ((stage base + it) ^ X) + Y with X, Y
  // the values at lane 0 of warp 0 (the generator checks this identity
  // exhaustively for its configurations; the sample check below would
  // catch a wrong one).
  int q = lane / 8, r8 = lane % 8;
  int aOff0 = swz<BK>(wm * WM + lane % 16, (q / 2) * 8);
  int bOff0 = swz<BN>((q % 2) * 8 + r8, wn * WN + (q / 2) * 8);
  float acc[MT][NT][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        acc[i][j][e] = 0.f;

  int KT = (K + BK - 1) / BK;
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < KT)
      load_tile(s, s);
    asm volatile("cp.async.commit_group;\n" ::);
  }
  uint32_t sAu = smem_u32(sA), sBu = smem_u32(sB);
  for (int kt = 0; kt < KT; ++kt) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 2));
    __syncthreads();
    int nk = kt + STAGES - 1;
    if (nk < KT)
      load_tile(nk, nk % STAGES);
    asm volatile("cp.async.commit_group;\n" ::);
    int stage = kt % STAGES;
    int aStage = stage * BM * BK + aOff0, bStage = stage * BK * BN + bOff0;
#pragma unroll
    for (int ks = 0; ks < BK / 16; ++ks) {
      uint32_t a[MT][4], b[NT][2];
#pragma unroll
      for (int mi = 0; mi < MT; ++mi) {
        int y = 16 * mi * BK, x = swz<BK>(16 * mi, 16 * ks) - y;
        ldmatrix_x4(a[mi], sAu + 2 * ((aStage ^ x) + y));
      }
#pragma unroll
      for (int nj = 0; nj < NT / 2; ++nj) {
        int y = 16 * ks * BN, x = swz<BN>(16 * ks, 16 * nj) - y;
        uint32_t t[4];
        ldmatrix_x4_trans(t, sBu + 2 * ((bStage ^ x) + y));
        b[2 * nj][0] = t[0];
        b[2 * nj][1] = t[1];
        b[2 * nj + 1][0] = t[2];
        b[2 * nj + 1][1] = t[3];
      }
#pragma unroll
      for (int mi = 0; mi < MT; ++mi)
#pragma unroll
        for (int ni = 0; ni < NT; ++ni) {
          int nn = mi % 2 ? NT - 1 - ni : ni;
          mma_bf16(acc[mi][nn], a[mi], b[nn]);
        }
    }
  }

  // Epilogue: bias + exact gelu per element, a bf16x2 store per pair.
  int g = lane / 4, tq = lane % 4;
#pragma unroll
  for (int mi = 0; mi < MT; ++mi)
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
      int row = m0 + wm * WM + mi * 16 + g + hi * 8;
#pragma unroll
      for (int ni = 0; ni < NT; ++ni) {
        int col = n0 + wn * WN + ni * 8 + 2 * tq;
        if (row < M && col < N) {
          float v[2];
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            float x = acc[mi][ni][hi * 2 + h] + __bfloat162float(bias[col + h]);
            v[h] = 0.5f * x * (1.f + erff(x * 0.70710678f));
          }
          *reinterpret_cast<__nv_bfloat162 *>(C + (size_t)row * N + col) =
              __floats2bfloat162_rn(v[0], v[1]);
        }
      }
    }
}

// Naive reference: one thread per sampled output, f32 accumulation.
__global__ void reference(const bf16 *A, const bf16 *B, const bf16 *bias,
                          const int *rows, const int *cols, float *out, int n,
                          int N, int K) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  int r = rows[i], c = cols[i];
  float s = 0.f;
  for (int k = 0; k < K; ++k)
    s += __bfloat162float(A[(size_t)r * K + k]) *
         __bfloat162float(B[(size_t)k * N + c]);
  float x = s + __bfloat162float(bias[c]);
  out[i] = 0.5f * x * (1.f + erff(x * 0.70710678f));
}

// Deterministic pseudo-random bf16 in [-1, 1) (never zeros everywhere).
__global__ void fill(bf16 *p, size_t n, uint32_t seed) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  for (; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t x = (uint32_t)i * 2654435761u ^ seed;
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    p[i] = __float2bfloat16((x & 0xffff) / 32768.0f - 1.0f);
  }
}

struct Problem {
  int M, N, K, reps;
  bf16 *A, *B, *bias, *C;
  int *rows, *cols;
  float *ref;
  int samples;
};

static float median_ms(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES,
          int GROUP_M>
static void run(Problem &P) {
  auto kern = gemm_bias_gelu<BM, BN, BK, WARPS_M, WARPS_N, STAGES, GROUP_M>;
  int smem = STAGES * (BM + BN) * BK * 2;
  CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             smem));
  int tiles = ((P.M + BM - 1) / BM) * ((P.N + BN - 1) / BN);
  dim3 grid(tiles), block(WARPS_M * WARPS_N * 32);
  CHECK(cudaMemset(P.C, 0, (size_t)P.M * P.N * 2));
  kern<<<grid, block, smem>>>(P.A, P.B, P.bias, P.C, P.M, P.N, P.K);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  // Check a sample against the naive reference.
  std::vector<bf16> got(P.samples);
  std::vector<int> rows(P.samples), cols(P.samples);
  std::vector<float> ref(P.samples);
  CHECK(cudaMemcpy(rows.data(), P.rows, P.samples * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(cols.data(), P.cols, P.samples * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(ref.data(), P.ref, P.samples * 4, cudaMemcpyDeviceToHost));
  double worst = 0;
  for (int i = 0; i < P.samples; ++i) {
    bf16 v;
    CHECK(cudaMemcpy(&v, P.C + (size_t)rows[i] * P.N + cols[i], 2,
                     cudaMemcpyDeviceToHost));
    double e = std::fabs((double)__bfloat162float(v) - ref[i]) /
               std::max(1.0, std::fabs((double)ref[i]));
    worst = std::max(worst, e);
  }
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i)
    kern<<<grid, block, smem>>>(P.A, P.B, P.bias, P.C, P.M, P.N, P.K);
  std::vector<float> ts;
  for (int i = 0; i < P.reps; ++i) {
    CHECK(cudaEventRecord(e0));
    kern<<<grid, block, smem>>>(P.A, P.B, P.bias, P.C, P.M, P.N, P.K);
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    ts.push_back(ms);
  }
  float ms = median_ms(ts);
  double tflops = 2.0 * P.M * P.N * (double)P.K / (ms * 1e-3) / 1e12;
  std::printf("mma_ref %dx%dx%d tile %dx%dx%d:%dx%dw:%ds:g%d smem %d: %.3f ms "
              "%.1f TFLOP/s, max rel err %.2e%s\n",
              P.M, P.N, P.K, BM, BN, BK, WARPS_M, WARPS_N, STAGES, GROUP_M,
              smem, ms, tflops, worst, worst > 2e-2 ? " WRONG" : "");
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
}

#ifdef WITH_CUBLAS
static void run_cublas(Problem &P) {
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
    std::printf("cublas: no handle\n");
    return;
  }
  float one = 1.f, zero = 0.f;
  // Row-major C = A B is column-major C^T = B^T A^T.
  auto gemm = [&]() {
    return cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, P.N, P.M, P.K, &one, P.B,
                        CUDA_R_16BF, P.N, P.A, CUDA_R_16BF, P.K, &zero, P.C,
                        CUDA_R_16BF, P.N, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT);
  };
  for (int i = 0; i < 3; ++i)
    gemm();
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::vector<float> ts;
  for (int i = 0; i < P.reps; ++i) {
    CHECK(cudaEventRecord(e0));
    gemm();
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    ts.push_back(ms);
  }
  float ms = median_ms(ts);
  std::printf("cublas %dx%dx%d mm alone: %.3f ms %.1f TFLOP/s\n", P.M, P.N,
              P.K, ms, 2.0 * P.M * P.N * (double)P.K / (ms * 1e-3) / 1e12);
  cublasDestroy(h);
}
#endif

int main(int argc, char **argv) {
  Problem P{};
  P.M = argc > 3 ? std::atoi(argv[1]) : 4096;
  P.N = argc > 3 ? std::atoi(argv[2]) : 4096;
  P.K = argc > 3 ? std::atoi(argv[3]) : 4096;
  P.reps = argc > 4 ? std::atoi(argv[4]) : argc == 2 ? std::atoi(argv[1]) : 20;
  if (P.M < 8 || P.N < 8 || P.K < 8 || P.N % 8 || P.K % 8 || P.reps < 1) {
    std::fprintf(stderr, "usage: mma_ref [M N K] [reps]  (N, K multiples of "
                         "8)\n");
    return 2;
  }
  CHECK(cudaMalloc(&P.A, (size_t)P.M * P.K * 2));
  CHECK(cudaMalloc(&P.B, (size_t)P.K * P.N * 2));
  CHECK(cudaMalloc(&P.bias, (size_t)P.N * 2));
  CHECK(cudaMalloc(&P.C, (size_t)P.M * P.N * 2));
  fill<<<1024, 256>>>(P.A, (size_t)P.M * P.K, 1);
  fill<<<1024, 256>>>(P.B, (size_t)P.K * P.N, 2);
  fill<<<64, 256>>>(P.bias, P.N, 3);
  P.samples = 4096;
  std::vector<int> rows(P.samples), cols(P.samples);
  for (int i = 0; i < P.samples; ++i) {
    rows[i] = (int)((i * 2654435761u) % (unsigned)P.M);
    cols[i] = (int)((i * 40503u + 7) % (unsigned)P.N);
  }
  rows[0] = P.M - 1; // the corners
  cols[0] = P.N - 1;
  CHECK(cudaMalloc(&P.rows, P.samples * 4));
  CHECK(cudaMalloc(&P.cols, P.samples * 4));
  CHECK(cudaMalloc(&P.ref, P.samples * 4));
  CHECK(cudaMemcpy(P.rows, rows.data(), P.samples * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(P.cols, cols.data(), P.samples * 4, cudaMemcpyHostToDevice));
  reference<<<(P.samples + 127) / 128, 128>>>(P.A, P.B, P.bias, P.rows, P.cols,
                                              P.ref, P.samples, P.N, P.K);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  // The configurations to compare with the generated kernel's sweep
  // (bench/gpu/run.sh MMA_TILES): BM, BN, BK, warps M x N, stages, group.
  run<128, 256, 32, 2, 4, 4, 8>(P);
  run<128, 256, 32, 2, 4, 3, 8>(P);
  run<128, 256, 64, 2, 4, 3, 8>(P);
  run<256, 128, 32, 4, 2, 4, 8>(P);
  run<128, 128, 32, 2, 2, 4, 8>(P);
  run<128, 128, 64, 2, 2, 3, 8>(P);
  run<128, 128, 32, 2, 4, 4, 8>(P);
#ifdef WITH_CUBLAS
  run_cublas(P);
#endif
  return 0;
}
