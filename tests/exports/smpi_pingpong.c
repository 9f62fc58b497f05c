/* One-way time of a message between ranks 0 and 1 under SMPI: half the
 * round trip of a ping-pong, per size given on the command line. One
 * round trip before the clock starts lines the ranks up (a rendezvous send
 * would otherwise also wait out the barrier's skew). Prints "size ns". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define REPS 4

static void round_trip(int rank, char *buf, long s)
{
    if (rank == 0) {
        MPI_Send(buf, (int)s, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
        MPI_Recv(buf, (int)s, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
        MPI_Recv(buf, (int)s, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf, (int)s, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long largest = 1;
    for (int i = 1; i < argc; i++)
        if (atol(argv[i]) > largest)
            largest = atol(argv[i]);
    char *buf = calloc((size_t)largest, 1);
    for (int i = 1; i < argc; i++) {
        long s = atol(argv[i]);
        MPI_Barrier(MPI_COMM_WORLD);
        round_trip(rank, buf, s);
        double t0 = MPI_Wtime();
        for (int r = 0; r < REPS; r++)
            round_trip(rank, buf, s);
        double t = (MPI_Wtime() - t0) / REPS / 2;
        if (rank == 0)
            printf("%ld %.3f\n", s, t * 1e9);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
