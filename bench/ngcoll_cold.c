/* ngcoll_cold.c: what an interposed collective costs when its caches are
 * cold, as on a rank that shares its core with others (every call then
 * follows another rank's time slice).
 *
 * One rank: before every call, 16 MiB are touched (the caches and TLBs
 * hold the toucher's data, not libngcoll's nor the library's); then one
 * MPI_Bcast (8 B) or MPI_Reduce (4 floats) on MPI_COMM_WORLD is timed,
 * through the interposed entry point (MPI_X) and the library's own
 * (PMPI_X), alternately. On one rank every call passes through: the time
 * above PMPI_X's is libngcoll's path to that decision, cold.
 *
 * Usage (bench/ngcoll.md, "The cost of passing through"):
 *   mpicc.openmpi -O2 bench/ngcoll_cold.c -o cold
 *   LD_PRELOAD=target/release/libngcoll_ompi.so mpirun.openmpi -np 1 ./cold
 * Output: the median time of each (ns). Calls are timed with the TSC (a
 * cold clock_gettime would add its own misses), converted with its rate
 * measured against CLOCK_MONOTONIC over 200 ms. x86-64 only. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <x86intrin.h>

#define N 2000
static char big[16 << 20];
static double t[2][2][N];

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    double c0 = now_ns();
    unsigned long long k0 = __rdtsc();
    while (now_ns() - c0 < 2e8)
        ;
    double ns_per_tick = (now_ns() - c0) / (double)(__rdtsc() - k0);
    char b[64] = {0};
    float f[16] = {0}, g[16] = {0};
    for (int i = 0; i < N; i++)
        for (int pmpi = 0; pmpi < 2; pmpi++)
            for (int k = 0; k < 2; k++) {
                for (size_t j = 0; j < sizeof big; j += 64)
                    big[j]++;
                unsigned long long t0 = __rdtsc();
                if (k == 0)
                    pmpi ? PMPI_Bcast(b, 8, MPI_CHAR, 0, MPI_COMM_WORLD)
                         : MPI_Bcast(b, 8, MPI_CHAR, 0, MPI_COMM_WORLD);
                else
                    pmpi ? PMPI_Reduce(f, g, 4, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD)
                         : MPI_Reduce(f, g, 4, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
                t[pmpi][k][i] = (double)(__rdtsc() - t0) * ns_per_tick;
            }
    for (int k = 0; k < 2; k++) {
        for (int pmpi = 0; pmpi < 2; pmpi++)
            qsort(t[pmpi][k], N, sizeof(double), cmp);
        printf("%s, cold: MPI_X %.0f ns, PMPI_X %.0f ns (medians of %d)\n", k ? "reduce" : "bcast",
               t[0][k][N / 2], t[1][k][N / 2], N);
    }
    MPI_Finalize();
    return 0;
}
