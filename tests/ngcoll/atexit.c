/* atexit.c: collectives from an atexit handler, after the C library has
 * run the thread-local destructors (libngcoll's thread caches included):
 * a final reduction over a predefined type and a broadcast, then
 * MPI_Finalize, as programs with a global clean-up do; and an allreduce
 * from the delete callback of an attribute on MPI_COMM_SELF, which
 * MPI_Finalize runs first thing (after libngcoll has freed its shadow
 * communicators). Prints one line from rank 0; exits 1 on a wrong
 * result. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int size;
static int self_ok = -1;

/* MPI_Finalize frees MPI_COMM_SELF's attributes before anything else; a
 * library's clean-up may still reduce over the world there. */
static int at_finalize(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    (void)comm, (void)keyval, (void)attr, (void)extra;
    enum { N = 8192 };
    static double v[N], s[N];
    for (int i = 0; i < N; i++)
        v[i] = (double)i;
    MPI_Allreduce(v, s, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    self_ok = 1;
    for (int i = 0; i < N; i++)
        if (s[i] != (double)i * size)
            self_ok = 0;
    return MPI_SUCCESS;
}

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
    if (rank == 0)
        printf("atexit: allreduce from MPI_COMM_SELF's delete callback in MPI_Finalize: %s\n",
               self_ok == 1 ? "ok" : "WRONG");
    if (!ok || self_ok != 1)
        _Exit(1);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    atexit(finish);
    int keyval;
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, at_finalize, &keyval, NULL);
    MPI_Comm_set_attr(MPI_COMM_SELF, keyval, NULL);
    long v = 1, total = 0;
    MPI_Allreduce(&v, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    return total == size ? 0 : 1;
}
