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
 * With --cvar NAME=VALUE (repeatable) the MPI_X side runs on a duplicate of
 * MPI_COMM_WORLD made after those MPI_T control variables are written, and
 * PMPI_X on MPI_COMM_WORLD itself: under Open MPI (launched with
 * coll_tuned_use_dynamic_rules=1) one of the library's own algorithms,
 * forced with coll_tuned_<coll>_algorithm, against its fixed decision,
 * interleaved in one process as above.
 * With --rules FILE (an Open MPI coll/tuned rules file, classic format;
 * Open MPI launched with coll_tuned_use_dynamic_rules=1 and without the
 * file) the MPI_X side runs every call the way Open MPI runs it under that
 * file: the file's block for the largest communicator size not above the
 * job's, the last rule whose message size is at or below the call's
 * (block x ranks for allgather and alltoall); each rule that names an
 * algorithm is forced, with its fan-in/out and segment size, on a
 * duplicate of MPI_COMM_WORLD of its own (Open MPI passes a rule's three
 * numbers to the same call as a forced algorithm's), and algorithm 0 runs
 * on MPI_COMM_WORLD, the fixed decision. PMPI_X: MPI_COMM_WORLD. So the
 * file's effect is measured interleaved in one process, without the drift
 * between two runs. Not with --cvar. With --rule-sizes (and --rules)
 * the first size of every rule that names an algorithm is measured too,
 * so that a verification run sees every rule.
 * Sizes: the message (bcast, reduce, allreduce: MPI_CHAR / MPI_FLOAT sum)
 * or the block per rank (allgather, alltoall: MPI_CHAR), powers of two.
 *
 * Output (rank 0): one line per point,
 *   point <coll> <mode> <bytes> <t_mpi_us> <t_pmpi_us|nan> <n>
 * Usage: ngcoll_bench [--modes sync,b2b,rot] [--colls bcast,reduce,...]
 *                     [--min 4] [--max 4194304] [--block-max 1048576]
 *                     [--reps 7] [--target-ms 10] [--min-calls 1] [--sync-calls 201]
 *                     [--step 2] [--no-pmpi] [--cvar NAME=VALUE ...] [--rules FILE]
 *                     [--rule-sizes]
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
/* The communicator of the MPI_X side (see --cvar), or with --rules the
 * one of the rule for (collective, bytes): rule_comm. */
static MPI_Comm xcomm;
static MPI_Comm rule_comm(int c, size_t bytes);
static int have_rules;

/* One call: through the interposed entry point (pmpi = 0) or the library's
 * own (pmpi = 1). */
static void call(int c, int pmpi, size_t bytes, int root)
{
    int nf = (int)(bytes / 4), nc = (int)bytes;
    MPI_Comm x = have_rules ? rule_comm(c, bytes) : xcomm;
    switch (c) {
    case BCAST:
        pmpi ? PMPI_Bcast(sbuf, nc, MPI_CHAR, root, MPI_COMM_WORLD)
             : MPI_Bcast(sbuf, nc, MPI_CHAR, root, x);
        break;
    case REDUCE:
        pmpi ? PMPI_Reduce(sbuf, rbuf, nf, MPI_FLOAT, MPI_SUM, root, MPI_COMM_WORLD)
             : MPI_Reduce(sbuf, rbuf, nf, MPI_FLOAT, MPI_SUM, root, x);
        break;
    case ALLREDUCE:
        pmpi ? PMPI_Allreduce(sbuf, rbuf, nf, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD)
             : MPI_Allreduce(sbuf, rbuf, nf, MPI_FLOAT, MPI_SUM, x);
        break;
    case ALLGATHER:
        pmpi ? PMPI_Allgather(sbuf, nc, MPI_CHAR, rbuf, nc, MPI_CHAR, MPI_COMM_WORLD)
             : MPI_Allgather(sbuf, nc, MPI_CHAR, rbuf, nc, MPI_CHAR, x);
        break;
    case ALLTOALL:
        pmpi ? PMPI_Alltoall(sbuf, nc, MPI_CHAR, rbuf, nc, MPI_CHAR, MPI_COMM_WORLD)
             : MPI_Alltoall(sbuf, nc, MPI_CHAR, rbuf, nc, MPI_CHAR, x);
        break;
    case BARRIER:
        pmpi ? PMPI_Barrier(MPI_COMM_WORLD) : MPI_Barrier(x);
        break;
    }
}

/* Writes the integer MPI_T control variable `name` (every rank, the same
 * value); aborts with a message when the library has no such variable or
 * does not let it be written. */
static void write_cvar(const char *name, int value)
{
    int idx, count;
    MPI_T_cvar_handle h;
    if (MPI_T_cvar_get_index(name, &idx) != MPI_SUCCESS ||
        MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) != MPI_SUCCESS || count != 1 ||
        MPI_T_cvar_write(h, &value) != MPI_SUCCESS) {
        if (!rank)
            fprintf(stderr, "ngcoll_bench: cannot write the control variable %s\n", name);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_T_cvar_handle_free(&h);
}

/* --rules: per collective, the message-size rules of the file's block
 * for this communicator size, each with the communicator it runs on. */
enum { MAX_RULES = 64 };
static const int ompi_ids[NCOLL] = {7, 11, 2, 0, 3, 6}; /* bcast … barrier */
static struct rule {
    long bytes, alg, faninout, segsize;
    MPI_Comm comm;
} rules[NCOLL][MAX_RULES];
static int nrules[NCOLL];

/* The next number of a rules file (Open MPI's reader: '#' starts a comment
 * to the end of the line, any other non-digit separates); -1 at the end,
 * -2 for a number Open MPI would not read as this one (a sign, more digits
 * than fit). */
static long next_number(FILE *f)
{
    int ch, prev = 0;
    while ((ch = fgetc(f)) != EOF) {
        if (ch == '#') {
            while ((ch = fgetc(f)) != EOF && ch != '\n')
                ;
        } else if (ch >= '0' && ch <= '9') {
            if (prev == '-' || prev == '+')
                return -2;
            long v = ch - '0';
            int digits = 1;
            while ((ch = fgetc(f)) != EOF && ch >= '0' && ch <= '9')
                if (++digits > 15)
                    return -2;
                else
                    v = v * 10 + (ch - '0');
            /* The character after the number is the next one's to read
             * (a sign, a comment). */
            if (ch != EOF)
                ungetc(ch, f);
            return v;
        }
        prev = ch;
    }
    return -1;
}

static void bad_rules(const char *path, const char *why)
{
    if (!rank)
        fprintf(stderr, "ngcoll_bench: %s: %s\n", path, why);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

static void load_rules(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        bad_rules(path, "cannot open");
    long ncoll = next_number(f);
    if (ncoll < 0)
        bad_rules(path, "no collective count");
    for (long i = 0; i < ncoll; i++) {
        long id = next_number(f), ncomm = next_number(f);
        if (id < 0 || ncomm < 0)
            bad_rules(path, "truncated, or a number Open MPI reads otherwise");
        int c = -1, found = 0;
        for (int k = 0; k < NCOLL; k++)
            if (ompi_ids[k] == id)
                c = k;
        for (long j = 0; j < ncomm; j++) {
            long comm = next_number(f), nmsg = next_number(f);
            if (comm < 0 || nmsg < 0 || nmsg > MAX_RULES)
                bad_rules(path, "truncated, or too many message sizes");
            /* Only the block for exactly this many ranks: what a
             * verification run measures is that block's rules. */
            int take = c >= 0 && comm == size;
            found |= take;
            if (take)
                nrules[c] = (int)nmsg;
            for (long k = 0; k < nmsg; k++) {
                struct rule r = {0, 0, 0, 0, MPI_COMM_WORLD};
                r.bytes = next_number(f);
                r.alg = next_number(f);
                r.faninout = next_number(f);
                r.segsize = next_number(f);
                if (r.bytes < 0 || r.alg < 0 || r.faninout < 0 || r.segsize < 0)
                    bad_rules(path, "truncated, or a number Open MPI reads otherwise");
                if (take)
                    rules[c][k] = r;
            }
        }
        if (c >= 0 && !found)
            bad_rules(path, "a collective without a block for this many ranks");
    }
    fclose(f);
    /* One duplicate per rule that names an algorithm, made after its
     * algorithm, fan-in/out and segment size are written. */
    MPI_T_init_thread(MPI_THREAD_SINGLE, &(int){0});
    for (int c = 0; c < NCOLL; c++) {
        for (int k = 0; k < nrules[c]; k++) {
            struct rule *r = &rules[c][k];
            if (!r->alg)
                continue;
            char name[96];
            snprintf(name, sizeof name, "coll_tuned_%s_algorithm", names[c]);
            write_cvar(name, (int)r->alg);
            if (c != BARRIER) {
                snprintf(name, sizeof name, "coll_tuned_%s_algorithm_segmentsize", names[c]);
                write_cvar(name, (int)r->segsize);
            }
            if (c == BCAST || c == REDUCE) {
                snprintf(name, sizeof name, "coll_tuned_%s_algorithm_chain_fanout", names[c]);
                write_cvar(name, (int)r->faninout);
                snprintf(name, sizeof name, "coll_tuned_%s_algorithm_tree_fanout", names[c]);
                write_cvar(name, (int)r->faninout);
            }
            PMPI_Comm_dup(MPI_COMM_WORLD, &r->comm);
        }
        char name[96];
        snprintf(name, sizeof name, "coll_tuned_%s_algorithm", names[c]);
        write_cvar(name, 0);
    }
    MPI_T_finalize();
    have_rules = 1;
    /* The header `ngctl export --trials` reads a verification run by. */
    MPI_Comm node;
    int local, first, nodes;
    PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    PMPI_Comm_rank(node, &local);
    first = local == 0;
    PMPI_Allreduce(&first, &nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    PMPI_Comm_free(&node);
    if (!rank)
        printf("# forced rules: %d ranks, %d node%s\n# rules file %s\n", size, nodes,
               nodes == 1 ? "" : "s", path);
}

/* The size Open MPI looks a call's rule up by: count x type size (reduce
 * and allreduce send bytes/4 floats), allgather and alltoall x ranks. */
static long rule_key(int c, size_t bytes)
{
    if (c == REDUCE || c == ALLREDUCE)
        return (long)(bytes / 4 * 4);
    return (long)bytes * ((c == ALLGATHER || c == ALLTOALL) ? size : 1);
}

static MPI_Comm rule_comm(int c, size_t bytes)
{
    long m = rule_key(c, bytes);
    MPI_Comm comm = MPI_COMM_WORLD;
    for (int k = 0; k < nrules[c]; k++)
        if (rules[c][k].bytes <= m)
            comm = rules[c][k].comm;
    return comm;
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

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
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
    int min_calls = 1, cvars = 0, provided, rule_sizes = 0;
    xcomm = MPI_COMM_WORLD;
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
        else if (!strcmp(argv[i], "--rule-sizes"))
            rule_sizes = 1;
        else if (!strcmp(argv[i], "--rules") && i + 1 < argc && !cvars)
            load_rules(argv[++i]);
        else if (!strcmp(argv[i], "--cvar") && i + 1 < argc && strchr(argv[i + 1], '=') &&
                 !have_rules) {
            char name[256];
            const char *eq = strchr(argv[++i], '=');
            snprintf(name, sizeof name, "%.*s", (int)(eq - argv[i]), argv[i]);
            if (!cvars++)
                MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
            write_cvar(name, atoi(eq + 1));
            if (!rank)
                printf("# MPI_X side: %s = %d\n", name, atoi(eq + 1));
        }
        else {
            if (!rank)
                fprintf(stderr, "ngcoll_bench: unknown argument %s\n", argv[i]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (cvars) {
        /* The duplicate takes the values just written; world keeps its own. */
        PMPI_Comm_dup(MPI_COMM_WORLD, &xcomm);
        MPI_T_finalize();
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
        /* The sizes: powers of `step`, and with --rule-sizes the first
         * size of every rule that names an algorithm, in order. */
        size_t sizes[256];
        int nsizes = 0;
        for (size_t b = c == BARRIER ? 0 : min; b <= (c == BARRIER ? 0 : top) && nsizes < 128;
             b = b ? b * (size_t)step : 1)
            sizes[nsizes++] = b;
        for (int k = 0; rule_sizes && c != BARRIER && k < nrules[c] && nsizes < 256; k++) {
            /* The smallest call size that the rule applies to. */
            size_t per = (c == ALLGATHER || c == ALLTOALL) ? (size_t)size : 1;
            size_t b = ((size_t)rules[c][k].bytes + per - 1) / per;
            if (c == REDUCE || c == ALLREDUCE)
                b = (b + 3) / 4 * 4;
            if (rules[c][k].alg && b >= min && b <= top)
                sizes[nsizes++] = b;
        }
        qsort(sizes, (size_t)nsizes, sizeof *sizes, cmp_size);
        for (int si = 0; si < nsizes; si++) {
            size_t bytes = sizes[si];
            if (si && bytes == sizes[si - 1])
                continue;
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
    if (xcomm != MPI_COMM_WORLD)
        PMPI_Comm_free(&xcomm);
    for (int c = 0; c < NCOLL; c++)
        for (int k = 0; k < nrules[c]; k++)
            if (rules[c][k].comm != MPI_COMM_WORLD)
                PMPI_Comm_free(&rules[c][k].comm);
    MPI_Finalize();
    return 0;
}
