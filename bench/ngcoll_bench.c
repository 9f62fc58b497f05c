/* ngcoll_bench.c: times MPI collectives the way a program sees them.
 *
 * For every (collective, size) point it times the interposed MPI_X (libngcoll
 * when it is preloaded, else the library) and PMPI_X (always the library's
 * own), interleaved in one process (A B B A A B …), so that both run under
 * the same conditions; with --no-pmpi only MPI_X (to compare two runs, e.g.
 * the library with and without a rules file).
 *
 * Methodologies (--modes):
 *   sync  synchronized single calls: every rank starts at one instant on
 *         the node's CLOCK_MONOTONIC (agreed a margin ahead), the time is
 *         the last rank's return minus that instant; median of the calls.
 *   b2b   back to back from root 0: after a barrier every rank times n
 *         calls issued back to back (no barrier between them) and divides
 *         by n; t_avg is the mean over ranks; median of the repetitions.
 *   rot   as b2b with the root rotating (call i from rank i mod P); only
 *         for collectives with a root.
 * Sizes: the message (bcast, reduce, allreduce: MPI_CHAR / MPI_FLOAT sum)
 * or the block per rank (allgather, alltoall: MPI_CHAR), powers of two.
 *
 * Output (rank 0): one line per point,
 *   point <coll> <mode> <bytes> <t_mpi_us> <t_pmpi_us|nan> <n>
 * Usage: ngcoll_bench [--modes sync,b2b,rot] [--colls bcast,reduce,...]
 *                     [--min 4] [--max 4194304] [--block-max 1048576]
 *                     [--reps 7] [--target-ms 10] [--min-calls 1] [--sync-calls 201]
 *                     [--step 2] [--no-pmpi]
 * (--min-calls: at least this many calls per repetition however long they
 * take, so a program's call count does not shrink on a loaded machine;
 * --sync-calls: at most this many synchronized calls per repetition;
 * under MPICH every harness barrier spins, so its runs use fewer; --step:
 * the factor between sizes, 2 = every power of two.) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

enum { BCAST, REDUCE, ALLREDUCE, ALLGATHER, ALLTOALL, BARRIER, NCOLL };
static const char *names[NCOLL] = {"bcast", "reduce", "allreduce", "allgather", "alltoall", "barrier"};
static int rooted(int c) { return c == BCAST || c == REDUCE; }

static int rank, size;
static char *sbuf, *rbuf;

/* One call: through the interposed entry point (pmpi = 0) or the library's
 * own (pmpi = 1). */
static void call(int c, int pmpi, size_t bytes, int root)
{
    int nf = (int)(bytes / 4), nc = (int)bytes;
    switch (c) {
    case BCAST:
        pmpi ? PMPI_Bcast(sbuf, nc, MPI_CHAR, root, MPI_COMM_WORLD)
             : MPI_Bcast(sbuf, nc, MPI_CHAR, root, MPI_COMM_WORLD);
        break;
    case REDUCE:
        pmpi ? PMPI_Reduce(sbuf, rbuf, nf, MPI_FLOAT, MPI_SUM, root, MPI_COMM_WORLD)
             : MPI_Reduce(sbuf, rbuf, nf, MPI_FLOAT, MPI_SUM, root, MPI_COMM_WORLD);
        break;
    case ALLREDUCE:
        pmpi ? PMPI_Allreduce(sbuf, rbuf, nf, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD)
             : MPI_Allreduce(sbuf, rbuf, nf, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    case ALLGATHER:
        pmpi ? PMPI_Allgather(sbuf, nc, MPI_CHAR, rbuf, nc, MPI_CHAR, MPI_COMM_WORLD)
             : MPI_Allgather(sbuf, nc, MPI_CHAR, rbuf, nc, MPI_CHAR, MPI_COMM_WORLD);
        break;
    case ALLTOALL:
        pmpi ? PMPI_Alltoall(sbuf, nc, MPI_CHAR, rbuf, nc, MPI_CHAR, MPI_COMM_WORLD)
             : MPI_Alltoall(sbuf, nc, MPI_CHAR, rbuf, nc, MPI_CHAR, MPI_COMM_WORLD);
        break;
    case BARRIER:
        pmpi ? PMPI_Barrier(MPI_COMM_WORLD) : MPI_Barrier(MPI_COMM_WORLD);
        break;
    }
}

/* Whether `name` is one of the comma-separated items of `list`. */
static int listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == 0 || p[n] == ','))
            return 1;
    return 0;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double margin_us;

/* One synchronized call: last rank's return − the common start. */
static double sync_once(int c, int pmpi, size_t bytes, int root)
{
    PMPI_Barrier(MPI_COMM_WORLD);
    double want = now_us() + margin_us, t0;
    PMPI_Allreduce(&want, &t0, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    while (now_us() < t0)
        sched_yield();
    call(c, pmpi, bytes, root);
    double end = now_us(), last;
    PMPI_Allreduce(&end, &last, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return last - t0;
}

/* n calls back to back: mean over ranks of each rank's time per call. */
static double b2b_once(int c, int pmpi, size_t bytes, int n, int rotate)
{
    PMPI_Barrier(MPI_COMM_WORLD);
    double t = now_us();
    for (int i = 0; i < n; i++)
        call(c, pmpi, bytes, rotate ? i % size : 0);
    t = (now_us() - t) / n;
    double sum;
    PMPI_Allreduce(&t, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sum / size;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *modes = "sync,b2b,rot", *colls = "bcast,reduce,allreduce,allgather,alltoall,barrier";
    size_t min = 4, max = 4u << 20, block_max = 1u << 20;
    int reps = 7, no_pmpi = 0, sync_calls = 201, step = 2;
    double target_ms = 10;
    int min_calls = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--modes") && i + 1 < argc)
            modes = argv[++i];
        else if (!strcmp(argv[i], "--colls") && i + 1 < argc)
            colls = argv[++i];
        else if (!strcmp(argv[i], "--min") && i + 1 < argc)
            min = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--max") && i + 1 < argc)
            max = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--block-max") && i + 1 < argc)
            block_max = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--target-ms") && i + 1 < argc)
            target_ms = atof(argv[++i]);
        else if (!strcmp(argv[i], "--min-calls") && i + 1 < argc)
            min_calls = atoi(argv[++i]) > 0 ? atoi(argv[i]) : 1;
        else if (!strcmp(argv[i], "--sync-calls") && i + 1 < argc)
            sync_calls = atoi(argv[++i]) > 0 ? atoi(argv[i]) : 1;
        else if (!strcmp(argv[i], "--step") && i + 1 < argc)
            step = atoi(argv[++i]) > 1 ? atoi(argv[i]) : 2;
        else if (!strcmp(argv[i], "--no-pmpi"))
            no_pmpi = 1;
        else {
            if (!rank)
                fprintf(stderr, "ngcoll_bench: unknown argument %s\n", argv[i]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    size_t cap = (max > block_max * (size_t)size ? max : block_max * (size_t)size) + 64;
    sbuf = malloc(cap);
    rbuf = malloc(cap);
    if (!sbuf || !rbuf)
        MPI_Abort(MPI_COMM_WORLD, 2);
    for (size_t i = 0; i < cap; i++)
        sbuf[i] = (char)(i * 7 + (size_t)rank), rbuf[i] = 0;
    /* The common start: a few times what agreeing on it costs. */
    double a[21];
    for (int i = 0; i < 21; i++) {
        PMPI_Barrier(MPI_COMM_WORLD);
        double t = now_us(), x = t, y;
        PMPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        a[i] = now_us() - t;
    }
    double med = median(a, 21), agreed;
    PMPI_Allreduce(&med, &agreed, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    margin_us = 4 * agreed > 20 ? 4 * agreed : 20;
    if (!rank) {
        char v[MPI_MAX_LIBRARY_VERSION_STRING];
        int l;
        MPI_Get_library_version(v, &l);
        char *nl = strchr(v, '\n');
        if (nl)
            *nl = 0;
        int (*abi)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "ngcoll_abi");
        printf("# ranks %d; %s; libngcoll %s; common start %.0f us ahead\n", size, v,
               abi ? "loaded" : "not loaded", margin_us);
    }
    for (int c = 0; c < NCOLL; c++) {
        if (!listed(colls, names[c]))
            continue;
        size_t top = (c == ALLGATHER || c == ALLTOALL) ? block_max : max;
        for (size_t bytes = c == BARRIER ? 0 : min; bytes <= (c == BARRIER ? 0 : top);
             bytes = bytes ? bytes * (size_t)step : 1) {
            /* Warm-up (and libngcoll's setup of the communicator). */
            for (int w = 0; w < 3; w++) {
                call(c, 0, bytes, 0);
                if (!no_pmpi)
                    call(c, 1, bytes, 0);
            }
            /* Calls per repetition: about target_ms of the library's own. */
            double t1 = sync_once(c, 1, bytes, 0), tmax;
            PMPI_Allreduce(&t1, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            int n = (int)(target_ms * 1e3 / (tmax > 0.5 ? tmax : 0.5));
            if (n < min_calls)
                n = min_calls;
            if (n > 2000)
                n = 2000;
            for (int mode = 0; mode < 3; mode++) {
                const char *mname = mode == 0 ? "sync" : mode == 1 ? "b2b" : "rot";
                if (!listed(modes, mname) || (mode == 2 && !rooted(c)))
                    continue;
                double ta[64], tb[64];
                int r = reps > 64 ? 64 : reps;
                for (int k = 0; k < r; k++) {
                    for (int s = 0; s < 2; s++) {
                        /* A B, then B A: neither goes first every time. */
                        int pmpi = (s + k) % 2;
                        if (pmpi && no_pmpi)
                            continue;
                        double v;
                        if (mode == 0) {
                            /* n synchronized calls; their median. */
                            int m = n > sync_calls ? sync_calls : n;
                            double *x = malloc(sizeof(double) * (size_t)m);
                            for (int i = 0; i < m; i++)
                                x[i] = sync_once(c, pmpi, bytes, i % size);
                            v = median(x, m);
                            free(x);
                        } else {
                            v = b2b_once(c, pmpi, bytes, n, mode == 2);
                        }
                        (pmpi ? tb : ta)[k] = v;
                    }
                }
                double ma = median(ta, r), mb = no_pmpi ? NAN : median(tb, r);
                if (!rank)
                    printf("point %s %s %zu %.3f %.3f %d\n", names[c], mname, bytes, ma, mb, n);
                fflush(stdout);
            }
        }
    }
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
