/* ngcoll_wrapper.c: the least an interposing library can be, for
 * comparison with libngcoll: each of the six collectives calls its PMPI_
 * twin, after DELAY TSC ticks of busy waiting (default 0: none).
 * Preloaded under bench/ngcoll_bench.c it shows what the bench sees of a
 * wrapper that costs nothing, or a known number of ns per call
 * (bench/ngcoll.md, "The cost of passing through").
 *   mpicc.openmpi -O2 -shared -fPIC [-DDELAY=1040] bench/ngcoll_wrapper.c -o libwrap.so */
#include <mpi.h>
#include <x86intrin.h>

#ifndef DELAY
#define DELAY 0
#endif

static inline void delay(void)
{
    unsigned long long t = __rdtsc();
    while (__rdtsc() - t < DELAY)
        ;
}

int MPI_Bcast(void *b, int n, MPI_Datatype t, int r, MPI_Comm c)
{
    delay();
    return PMPI_Bcast(b, n, t, r, c);
}
int MPI_Reduce(const void *s, void *d, int n, MPI_Datatype t, MPI_Op o, int r, MPI_Comm c)
{
    delay();
    return PMPI_Reduce(s, d, n, t, o, r, c);
}
int MPI_Allreduce(const void *s, void *d, int n, MPI_Datatype t, MPI_Op o, MPI_Comm c)
{
    delay();
    return PMPI_Allreduce(s, d, n, t, o, c);
}
int MPI_Allgather(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, MPI_Comm c)
{
    delay();
    return PMPI_Allgather(s, sn, st, r, rn, rt, c);
}
int MPI_Alltoall(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, MPI_Comm c)
{
    delay();
    return PMPI_Alltoall(s, sn, st, r, rn, rt, c);
}
int MPI_Barrier(MPI_Comm c)
{
    delay();
    return PMPI_Barrier(c);
}
