/* atexit.c: collectives from an atexit handler, after the C library has
 * run the thread-local destructors (libngcoll's thread caches included):
 * a final reduction over a predefined type and a broadcast, then
 * MPI_Finalize, as programs with a global clean-up do. Prints one line
 * from rank 0; exits 1 on a wrong result. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int size;

static void finish(void)
{
    double one = 1.0, sum = 0.0;
    int rank, word = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Allreduce(&one, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        word = 4242;
    MPI_Bcast(&word, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    int ok = sum == (double)size && word == 4242;
    if (rank == 0)
        printf("atexit: allreduce %g of %d ranks, bcast %d: %s\n", sum, size, word, ok ? "ok" : "WRONG");
    fflush(stdout);
    MPI_Finalize();
    if (!ok)
        _Exit(1);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    atexit(finish);
    long v = 1, total = 0;
    MPI_Allreduce(&v, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    return total == size ? 0 : 1;
}
