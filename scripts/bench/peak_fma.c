// This CPU's f32 ceiling: AVX-512 fused multiply-adds on 12 independent accumulators per thread,
// no memory traffic, so no matrix-product kernel can run faster. docs/perf-cpu.md uses it to
// bound what any f32 engine can reach on the benchmarks' FLOPs.
//
//     gcc -O3 -march=native -pthread -o peak_fma scripts/bench/peak_fma.c && ./peak_fma 2
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define ITERATIONS 400000000L
#define CHAINS 12

static void *run(void *out) {
    __m512 acc[CHAINS];
    const __m512 b = _mm512_set1_ps(1.0000001f), c = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_set1_ps((float)i);
    for (long it = 0; it < ITERATIONS; it++)
        for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_fmadd_ps(acc[i], b, c);
    float sum = 0;  // used, so the chains are not optimised away
    for (int i = 0; i < CHAINS; i++) sum += _mm512_reduce_add_ps(acc[i]);
    *(float *)out = sum;
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    if (threads < 1 || threads > 64) {
        fprintf(stderr, "threads must be 1..64, got %s\n", argv[1]);
        return 2;
    }
    pthread_t handles[64];
    float sums[64];
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (int i = 0; i < threads; i++) pthread_create(&handles[i], NULL, run, &sums[i]);
    for (int i = 0; i < threads; i++) pthread_join(handles[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &end);
    double seconds = (end.tv_sec - start.tv_sec) + (end.tv_nsec - start.tv_nsec) / 1e9;
    double flop = threads * (double)ITERATIONS * CHAINS * 16 * 2;
    printf("{\"threads\": %d, \"gflops\": %.1f, \"seconds\": %.2f}\n", threads, flop / seconds / 1e9, seconds);
    return 0;
}
