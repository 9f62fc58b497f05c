/* Concurrent flows of one size (argv[1] bytes) under SMPI, as the conflict
 * probe's schemes: k flows out of rank 0 (to ranks 1..k), k flows into it
 * (from ranks 1..k), and mixed: k out (to 1..k) and k in (from k+1..2k) at
 * once. Prints "scheme k ns": the time until rank 0's last flow completed,
 * the least of 3 repetitions. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

enum { OUT, IN, MIXED };

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    long s = argc > 1 ? atol(argv[1]) : 1 << 20;
    char *buf = calloc((size_t)s, (size_t)n);
    MPI_Request req[128];
    const char *names[] = {"out", "in", "mixed"};
    for (int scheme = OUT; scheme <= MIXED; scheme++) {
        int kmax = scheme == MIXED ? (n - 1) / 2 : n - 1;
        for (int k = 1; k <= kmax && k <= 64; k++) {
            double best = 1e30;
            for (int rep = 0; rep < 3; rep++) {
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime();
                if (rank == 0) {
                    int m = 0;
                    for (int i = 1; i <= k; i++) {
                        char *b = buf + (size_t)i * (size_t)s;
                        if (scheme == IN)
                            MPI_Irecv(b, (int)s, MPI_BYTE, i, 0, MPI_COMM_WORLD, &req[m++]);
                        else
                            MPI_Isend(b, (int)s, MPI_BYTE, i, 0, MPI_COMM_WORLD, &req[m++]);
                        if (scheme == MIXED)
                            MPI_Irecv(b + (size_t)k * (size_t)s, (int)s, MPI_BYTE, k + i, 0,
                                      MPI_COMM_WORLD, &req[m++]);
                    }
                    MPI_Waitall(m, req, MPI_STATUSES_IGNORE);
                } else if (rank <= k) {
                    if (scheme == IN)
                        MPI_Send(buf, (int)s, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
                    else
                        MPI_Recv(buf, (int)s, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else if (scheme == MIXED && rank <= 2 * k) {
                    MPI_Send(buf, (int)s, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
                }
                double t = MPI_Wtime() - t0;
                if (t < best)
                    best = t;
            }
            if (rank == 0)
                printf("%s %d %.3f\n", names[scheme], k, best * 1e9);
        }
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
