/* The consumer side of the rule exports' tests (tests/export_consumers.rs):
 * the same program for MPICH and Open MPI.
 *
 * 1. Every collective the exports cover runs once at a small and a large
 *    size, results checked (MPICH asserts on a selection tree without an
 *    entry for a collective it is asked to run).
 * 2. Which broadcast algorithm the library ran, seen without timing:
 *    rank LATE enters MPI_Bcast of BYTES only once rank WATCH has finished
 *    its own (WATCH sends it a token), or after a 3 s deadline. The program
 *    prints whether WATCH finished before LATE entered: "yes" when the
 *    algorithm's data reaches WATCH without passing through LATE (a tree
 *    in which LATE is not on WATCH's path), "no" when WATCH needs LATE
 *    (scatter + allgather: every rank needs every other).
 *
 * usage: colls BYTES LATE WATCH
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "colls: wrong result of %s\n", what);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return ok;
}

static void every_collective(int rank, int size, int count) {
    double *a = malloc(sizeof(double) * (size_t)count * size);
    double *b = malloc(sizeof(double) * (size_t)count * size);
    for (int i = 0; i < count * size; i++) a[i] = rank + 1;
    MPI_Bcast(a, count, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    check(a[count - 1] == 1.0, "MPI_Bcast");
    for (int i = 0; i < count; i++) a[i] = rank + 1;
    MPI_Reduce(a, b, count, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) check(b[count - 1] == size * (size + 1) / 2.0, "MPI_Reduce");
    MPI_Allreduce(a, b, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    check(b[0] == size * (size + 1) / 2.0, "MPI_Allreduce");
    MPI_Allgather(a, count, MPI_DOUBLE, b, count, MPI_DOUBLE, MPI_COMM_WORLD);
    check(b[(size_t)count * (size - 1)] == size, "MPI_Allgather");
    for (int i = 0; i < count * size; i++) a[i] = rank * 1000 + i / count;
    MPI_Alltoall(a, count, MPI_DOUBLE, b, count, MPI_DOUBLE, MPI_COMM_WORLD);
    check(b[(size_t)count * (size - 1)] == (size - 1) * 1000 + rank, "MPI_Alltoall");
    MPI_Barrier(MPI_COMM_WORLD);
    free(a);
    free(b);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 4) {
        if (rank == 0) fprintf(stderr, "usage: colls BYTES LATE WATCH\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int bytes = atoi(argv[1]), late = atoi(argv[2]), watch = atoi(argv[3]);
    every_collective(rank, size, 1);
    every_collective(rank, size, 32768);
    if (rank == 0) printf("collectives=ok\n");

    char *buf = calloc((size_t)bytes, 1);
    if (rank == 0) memset(buf, 7, (size_t)bytes);
    int token = 0, flag = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == late) {
        double deadline = MPI_Wtime() + 3.0;
        while (!flag && MPI_Wtime() < deadline)
            MPI_Iprobe(watch, 99, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    }
    MPI_Bcast(buf, bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
    check(buf[bytes - 1] == 7, "MPI_Bcast (watched)");
    if (rank == watch) MPI_Send(&token, 1, MPI_INT, late, 99, MPI_COMM_WORLD);
    if (rank == late) {
        MPI_Recv(&token, 1, MPI_INT, watch, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        printf("watch_done_before_late_entered=%s\n", flag ? "yes" : "no");
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
