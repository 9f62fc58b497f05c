/* disconnect.c: a communicator duplicated, used by a collective (which sets
 * up libngcoll's state and its shadow communicator), then released with
 * MPI_Comm_disconnect, N times over; then HELD duplicates used by a
 * collective and kept; then KEEP plain duplicates, kept. A shadow left
 * behind by each release, or one for every held communicator, would hold
 * one of the library's communicator contexts (MPICH 4.0 has 2048 per
 * process): the kept duplicates would then run out.
 * Usage: disconnect [N [KEEP [HELD]]]. Prints one line from rank 0; exits
 * 1 on a failure or a wrong result. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, size;
    int n = argc > 1 ? atoi(argv[1]) : 2500, keep = argc > 2 ? atoi(argv[2]) : 1500;
    int held = argc > 3 ? atoi(argv[3]) : 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    for (int i = 0; i < n; i++) {
        MPI_Comm c;
        long v = rank + i, total = 0;
        if (MPI_Comm_dup(MPI_COMM_WORLD, &c) != MPI_SUCCESS) {
            fprintf(stderr, "disconnect: MPI_Comm_dup failed at %d\n", i);
            return 1;
        }
        MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
        if (MPI_Allreduce(&v, &total, 1, MPI_LONG, MPI_SUM, c) != MPI_SUCCESS
            || total != (long)size * i + (long)size * (size - 1) / 2) {
            fprintf(stderr, "disconnect: allreduce wrong at %d\n", i);
            return 1;
        }
        if (MPI_Comm_disconnect(&c) != MPI_SUCCESS || c != MPI_COMM_NULL) {
            fprintf(stderr, "disconnect: MPI_Comm_disconnect failed at %d\n", i);
            return 1;
        }
    }
    MPI_Comm *used = malloc(sizeof(MPI_Comm) * (size_t)(held + 1));
    for (int i = 0; i < held; i++) {
        long v = rank * 3 + i, total = 0;
        if (MPI_Comm_dup(MPI_COMM_WORLD, &used[i]) != MPI_SUCCESS) {
            fprintf(stderr, "disconnect: duplicate %d of %d held failed\n", i, held);
            return 1;
        }
        MPI_Comm_set_errhandler(used[i], MPI_ERRORS_RETURN);
        if (MPI_Allreduce(&v, &total, 1, MPI_LONG, MPI_SUM, used[i]) != MPI_SUCCESS
            || total != (long)size * i + 3L * size * (size - 1) / 2) {
            fprintf(stderr, "disconnect: allreduce wrong on held %d\n", i);
            return 1;
        }
    }
    MPI_Comm *kept = malloc(sizeof(MPI_Comm) * (size_t)keep);
    for (int i = 0; i < keep; i++) {
        if (MPI_Comm_dup(MPI_COMM_WORLD, &kept[i]) != MPI_SUCCESS) {
            fprintf(stderr, "disconnect: after %d disconnected, duplicate %d of %d kept failed\n", n, i, keep);
            return 1;
        }
    }
    for (int i = 0; i < keep; i++)
        MPI_Comm_free(&kept[i]);
    for (int i = 0; i < held; i++)
        MPI_Comm_free(&used[i]);
    free(kept);
    free(used);
    if (rank == 0)
        printf("disconnect: %d communicators used and disconnected, %d used and held, then %d kept: ok\n", n,
               held, keep);
    MPI_Finalize();
    return 0;
}
