/* check.c: libngcoll's collectives against the MPI library's own.
 *
 * Runs random cases (the same on every rank: one seed) of MPI_Bcast,
 * MPI_Reduce, MPI_Allreduce, MPI_Allgather, MPI_Alltoall and MPI_Barrier
 * through the interposed MPI_ entry points (libngcoll when preloaded) and
 * the same call through PMPI_ (the library's own), and compares the
 * results: bitwise for integers, MAX/MIN and moved data; floating-point
 * sums within the reassociation bound (n·ε·Σ|x| per element).
 *
 * Cases draw: the collective; the communicator (world, a duplicate, the
 * halves of MPI_Comm_split by parity, a split of 3 ranks, a split leaving
 * the last rank out); sizes log-uniform from 0 B to 8 MiB (allgather and
 * alltoall: the whole receive buffer up to 8 MiB); the root; the datatype
 * (int, long, unsigned char, float, double, and for the byte-moving
 * collectives a strided vector type or a pair of ints in reverse order,
 * on every rank or on the root only);
 * the operation (sum, max, min, band; floating point: sum, max, min), a
 * user-defined operation now and then (passes through); MPI_IN_PLACE
 * where the standard allows it.
 *
 * Usage: check [cases] [seed]. Prints one summary line on rank 0; exits 1
 * on any mismatch. Build: mpicc -O2 check.c -o check. */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state;
static uint64_t rnd(void)
{
    /* xorshift64*: the same sequence on every rank. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}
static int rnd_int(int n) { return (int)(rnd() % (uint64_t)n); }

/* Log-uniform size in [0, max]: 0 in 1/16 of the cases. */
static size_t rnd_size(size_t max)
{
    if (rnd_int(16) == 0)
        return 0;
    double l = log((double)max) * (double)(rnd() >> 11) / 9007199254740992.0;
    size_t s = (size_t)exp(l);
    return s > max ? max : s;
}

enum { T_INT, T_LONG, T_UCHAR, T_FLOAT, T_DOUBLE, T_NTYPES };
static MPI_Datatype types[T_NTYPES];
static const size_t tsize[T_NTYPES] = {sizeof(int), sizeof(long), 1, sizeof(float), sizeof(double)};
static const char *tname[T_NTYPES] = {"int", "long", "uchar", "float", "double"};

enum { C_BCAST, C_REDUCE, C_ALLREDUCE, C_ALLGATHER, C_ALLTOALL, C_BARRIER, C_N };
static const char *cname[C_N] = {"bcast", "reduce", "allreduce", "allgather", "alltoall", "barrier"};

static int is_float(int t) { return t == T_FLOAT || t == T_DOUBLE; }

/* Fill with values of type t derived from (seed, rank, i). */
static void fill(void *buf, int t, size_t n, uint64_t seed)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        uint64_t v = s * 2685821657736338717ULL;
        switch (t) {
        case T_INT: ((int *)buf)[i] = (int)(v >> 33) - (1 << 30); break;
        case T_LONG: ((long *)buf)[i] = (long)(v >> 1) - (long)(1ULL << 62); break;
        /* Below 4: a sum over 64 ranks never wraps. Open MPI 4.1's AVX
         * reductions saturate 8-bit sums instead of wrapping
         * (open-mpi/ompi#8045), MPI_Reduce_local included, so a sum that
         * overflows differs with the order of combining. */
        case T_UCHAR: ((unsigned char *)buf)[i] = (unsigned char)(v >> 62); break;
        case T_FLOAT: ((float *)buf)[i] = (float)((double)(v >> 11) / 4503599627370496.0 - 1.0); break;
        case T_DOUBLE: ((double *)buf)[i] = (double)(v >> 11) / 4503599627370496.0 - 1.0; break;
        }
    }
}

static void fill_bytes(unsigned char *b, size_t n, uint64_t seed)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 7;
    for (size_t i = 0; i < n; i++) {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        b[i] = (unsigned char)((s * 2685821657736338717ULL) >> 56);
    }
}

/* A user-defined commutative sum of ints (passes through libngcoll). */
static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    for (int i = 0; i < *len; i++)
        ((int *)inout)[i] += ((int *)in)[i];
}

static long mismatches, cases_run[C_N], in_place_cases, derived_cases, user_op_cases, pair_cases, aliased_cases,
    invalid_cases;

/* MPI_SHORT_INT's layout: 6 bytes of data, a hole at 2..4, the int at 4. */
struct short_int {
    short v;
    int i;
};

/* Fill with (value, index) pairs: few values (ties for MINLOC/MAXLOC to
 * break by index), indices over the whole int range. */
static void fill_pairs(struct short_int *x, size_t n, uint64_t seed)
{
    fill_bytes((unsigned char *)x, n * sizeof *x, seed);
    for (size_t k = 0; k < n; k++)
        x[k].v = (short)(x[k].v % 50);
}

/* The data of two pair vectors (not the holes) equal. */
static int same_pairs(const struct short_int *a, const struct short_int *b, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (a[k].v != b[k].v || a[k].i != b[k].i)
            return 0;
    return 1;
}
static int world_rank, is_mpich;

static void report(const char *what, int coll, size_t bytes, int comm_kind)
{
    if (mismatches < 20)
        fprintf(stderr, "check: rank %d: %s mismatch in %s of %zu bytes (communicator %d)\n", world_rank, what,
                cname[coll], bytes, comm_kind);
    mismatches++;
}

/* Compare reduction results: exact, or within the reassociation bound. */
static int same_reduction(const void *a, const void *b, int t, size_t n, MPI_Op op, int p, const void *absum)
{
    if (!is_float(t) || op != MPI_SUM)
        return memcmp(a, b, n * tsize[t]) == 0;
    for (size_t i = 0; i < n; i++) {
        double x, y, s;
        if (t == T_FLOAT) {
            x = ((const float *)a)[i];
            y = ((const float *)b)[i];
            s = ((const double *)absum)[i] * (double)p * 1.2e-7 * 4;
        } else {
            x = ((const double *)a)[i];
            y = ((const double *)b)[i];
            s = ((const double *)absum)[i] * (double)p * 2.3e-16 * 4;
        }
        if (fabs(x - y) > s)
            return 0;
    }
    return 1;
}

#define MAX_BYTES ((size_t)8 << 20)

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    long ncases = argc > 1 ? atol(argv[1]) : 2000;
    uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 12345;
    int wsize;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int vlen = 0;
    MPI_Get_library_version(version, &vlen);
    is_mpich = strstr(version, "MPICH") != NULL;
    types[T_INT] = MPI_INT;
    types[T_LONG] = MPI_LONG;
    types[T_UCHAR] = MPI_UNSIGNED_CHAR;
    types[T_FLOAT] = MPI_FLOAT;
    types[T_DOUBLE] = MPI_DOUBLE;
    MPI_Op uop;
    MPI_Op_create(user_sum, 1, &uop);
    /* A strided type: 1 int every 2 (8 bytes of extent, 4 of data). */
    MPI_Datatype vec;
    MPI_Type_vector(1, 1, 2, MPI_INT, &vec);
    MPI_Datatype vecr;
    MPI_Type_create_resized(vec, 0, 2 * sizeof(int), &vecr);
    MPI_Type_commit(&vecr);
    /* A pair of ints in reverse order: no hole and no gap (size = extent =
     * true extent, lower bound 0), yet its data is not its memory in
     * order: sent as it lies in memory, the ints would arrive swapped. */
    MPI_Datatype revp;
    const int rev_len[2] = {1, 1}, rev_disp[2] = {1, 0};
    MPI_Type_indexed(2, rev_len, rev_disp, MPI_INT, &revp);
    MPI_Type_commit(&revp);

    /* Communicators: 0 world, 1 dup, 2 parity halves, 3 first three
     * ranks (others: none), 4 all but the last rank. */
    MPI_Comm comms[5];
    comms[0] = MPI_COMM_WORLD;
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[1]);
    MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_rank, &comms[2]);
    MPI_Comm_split(MPI_COMM_WORLD, world_rank < 3 ? 0 : MPI_UNDEFINED, world_rank, &comms[3]);
    MPI_Comm_split(MPI_COMM_WORLD, world_rank < wsize - 1 ? 0 : MPI_UNDEFINED, world_rank, &comms[4]);
    MPI_Comm errcomm;
    MPI_Comm_dup(MPI_COMM_WORLD, &errcomm);
    MPI_Comm_set_errhandler(errcomm, MPI_ERRORS_RETURN);

    size_t cap = MAX_BYTES + 64;
    unsigned char *in = malloc(cap), *a = malloc(cap), *b = malloc(cap), *in2 = malloc(cap);
    double *absum = malloc((MAX_BYTES / sizeof(float) + 16) * sizeof(double));
    if (!in || !a || !b || !in2 || !absum) {
        fprintf(stderr, "check: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    rng_state = seed ? seed : 1;
    for (long c = 0; c < ncases; c++) {
        int kind = rnd_int(5);
        int coll = rnd_int(C_N);
        int t = rnd_int(T_NTYPES);
        int opi = rnd_int(4);
        int in_place = rnd_int(3) == 0;
        int derived = rnd_int(4) == 0;
        int derived_root_only = rnd_int(2);
        /* Which derived type: the strided vector or the reversed pair,
         * with the ints of data per element (8 bytes of buffer each). */
        int reversed = rnd_int(2);
        /* One int whose send buffer is its receive buffer: Open MPI
         * accepts that for one element (MPICH refuses it). */
        int aliased = rnd_int(8) == 0 && !is_mpich;
        /* An operation the datatype does not take (MPI_BAND on doubles),
         * on a communicator whose errors return: every rank must get the
         * error, as from the library, and none wait. */
        int invalid = rnd_int(4) == 0;
        MPI_Datatype dtype = reversed ? revp : vecr;
        int ints_per = reversed ? 2 : 1;
        int use_uop = rnd_int(20) == 0;
        size_t bytes = rnd_size(MAX_BYTES);
        uint64_t cseed = rnd();
        MPI_Comm comm = comms[kind];
        if (comm == MPI_COMM_NULL)
            continue; /* this rank is not in that communicator */
        int p, r;
        MPI_Comm_size(comm, &p);
        MPI_Comm_rank(comm, &r);
        int root = (int)(cseed % (uint64_t)p);
        MPI_Op op = opi == 0 ? MPI_SUM : opi == 1 ? MPI_MAX : opi == 2 ? MPI_MIN : MPI_BAND;
        if (is_float(t) && op == MPI_BAND)
            op = MPI_SUM;
        cases_run[coll]++;
        switch (coll) {
        case C_BCAST: {
            int count;
            MPI_Datatype dt, rdt;
            int rcount;
            if (derived) {
                /* count vector elements (8 bytes of buffer each); the
                 * receivers use the vector too, or plain ints (same
                 * signature) when derived_root_only. */
                count = (int)(bytes / 8);
                dt = dtype;
                rdt = derived_root_only ? MPI_INT : dtype;
                rcount = derived_root_only ? count * ints_per : count;
                derived_cases++;
            } else {
                count = (int)(bytes / tsize[t]);
                dt = rdt = types[t];
                rcount = count;
            }
            size_t span = derived ? (size_t)count * 8 : (size_t)count * tsize[t];
            fill_bytes(in, span, cseed);
            fill_bytes(a, span, cseed + 1 + (uint64_t)r);
            memcpy(b, a, span);
            if (r == root)
                memcpy(a, in, span), memcpy(b, in, span);
            MPI_Datatype mine = r == root ? dt : rdt;
            int mycount = r == root ? count : rcount;
            MPI_Bcast(a, mycount, mine, root, comm);
            PMPI_Bcast(b, mycount, mine, root, comm);
            if (memcmp(a, b, span) != 0)
                report("data", coll, bytes, kind);
            break;
        }
        case C_REDUCE:
        case C_ALLREDUCE: {
            if (invalid && kind == 0) { /* every rank: errcomm is world's duplicate */
                int n = (int)(bytes / sizeof(double)) + 1;
                int rc1, rc2;
                if (coll == C_ALLREDUCE) {
                    rc1 = MPI_Allreduce(in, a, n, MPI_DOUBLE, MPI_BAND, errcomm);
                    rc2 = PMPI_Allreduce(in, b, n, MPI_DOUBLE, MPI_BAND, errcomm);
                } else {
                    rc1 = MPI_Reduce(in, a, n, MPI_DOUBLE, MPI_BAND, (int)(cseed % (uint64_t)wsize), errcomm);
                    rc2 = PMPI_Reduce(in, b, n, MPI_DOUBLE, MPI_BAND, (int)(cseed % (uint64_t)wsize), errcomm);
                }
                invalid_cases++;
                if (rc1 == MPI_SUCCESS || rc2 == MPI_SUCCESS)
                    report("invalid op", coll, bytes, kind);
                break;
            }
            if (aliased && coll == C_ALLREDUCE) {
                int x = (int)(cseed >> 8) + r * 7919, y = x;
                MPI_Allreduce(&x, &x, 1, MPI_INT, op, comm);
                PMPI_Allreduce(&y, &y, 1, MPI_INT, op, comm);
                aliased_cases++;
                if (x != y)
                    report("aliased int", coll, sizeof(int), kind);
                break;
            }
            int count = (int)(bytes / tsize[t]);
            if (use_uop) {
                t = T_INT;
                count = (int)(bytes / sizeof(int));
                op = uop;
                user_op_cases++;
            } else if ((cseed >> 40) % 8 == 0) {
                /* MINLOC/MAXLOC on MPI_SHORT_INT, whose data ends past its
                 * size (a hole inside each element). */
                size_t n = bytes / sizeof(struct short_int);
                MPI_Op pop = (cseed >> 44) & 1 ? MPI_MAXLOC : MPI_MINLOC;
                fill_pairs((struct short_int *)in, n, cseed + (uint64_t)r);
                memset(a, 0x5a, n * sizeof(struct short_int));
                memset(b, 0x5a, n * sizeof(struct short_int));
                if (coll == C_REDUCE && in_place && is_mpich)
                    root = 0; /* pmodels/mpich#6540, as below */
                int ip = in_place && (coll == C_ALLREDUCE || r == root);
                if (ip) {
                    memcpy(a, in, n * sizeof(struct short_int));
                    memcpy(b, in, n * sizeof(struct short_int));
                    in_place_cases++;
                }
                const void *src = ip ? MPI_IN_PLACE : in;
                if (coll == C_ALLREDUCE) {
                    MPI_Allreduce(src, a, (int)n, MPI_SHORT_INT, pop, comm);
                    PMPI_Allreduce(src, b, (int)n, MPI_SHORT_INT, pop, comm);
                } else {
                    MPI_Reduce(src, a, (int)n, MPI_SHORT_INT, pop, root, comm);
                    PMPI_Reduce(src, b, (int)n, MPI_SHORT_INT, pop, root, comm);
                }
                pair_cases++;
                if ((coll == C_ALLREDUCE || r == root) && !same_pairs((const struct short_int *)a, (const struct short_int *)b, n))
                    report("short-int pair", coll, bytes, kind);
                break;
            }
            fill(in, t, (size_t)count, cseed + (uint64_t)r);
            /* Σ|x| per element over the ranks, for the float bound. */
            if (is_float(t) && op == MPI_SUM) {
                for (int i = 0; i < count; i++)
                    absum[i] = 0;
                for (int q = 0; q < p; q++) {
                    fill(in2, t, (size_t)count, cseed + (uint64_t)q);
                    for (int i = 0; i < count; i++)
                        absum[i] += fabs(t == T_FLOAT ? (double)((float *)in2)[i] : ((double *)in2)[i]);
                }
            }
            size_t n = (size_t)count * tsize[t];
            memset(a, 0x5a, n);
            memset(b, 0x5a, n);
            /* MPICH 4.0.2 crashes on an in-place reduce to a root other
             * than 0 (pmodels/mpich#6540): with MPICH, in place means
             * root 0. */
            if (coll == C_REDUCE && in_place && is_mpich)
                root = 0;
            int ip = in_place && (coll == C_ALLREDUCE || r == root);
            /* In place (all ranks for allreduce; the root for reduce). */
            if (coll == C_ALLREDUCE && in_place) {
                memcpy(a, in, n);
                memcpy(b, in, n);
                MPI_Allreduce(MPI_IN_PLACE, a, count, types[t], op, comm);
                PMPI_Allreduce(MPI_IN_PLACE, b, count, types[t], op, comm);
                in_place_cases++;
            } else if (coll == C_ALLREDUCE) {
                MPI_Allreduce(in, a, count, types[t], op, comm);
                PMPI_Allreduce(in, b, count, types[t], op, comm);
            } else {
                if (ip) {
                    memcpy(a, in, n);
                    memcpy(b, in, n);
                    in_place_cases++;
                }
                MPI_Reduce(ip ? MPI_IN_PLACE : in, a, count, types[t], op, root, comm);
                PMPI_Reduce(ip ? MPI_IN_PLACE : in, b, count, types[t], op, root, comm);
            }
            if ((coll == C_ALLREDUCE || r == root) && !same_reduction(a, b, t, (size_t)count, op, p, absum))
                report(tname[t], coll, bytes, kind);
            break;
        }
        case C_ALLGATHER:
        case C_ALLTOALL: {
            /* Whole receive buffer ≤ 8 MiB: block = bytes / p. */
            size_t block = bytes / (size_t)p;
            int count;
            MPI_Datatype dt;
            size_t esz;
            if (derived) {
                dt = dtype;
                esz = 8;
                derived_cases++;
            } else {
                dt = types[t];
                esz = tsize[t];
            }
            count = (int)(block / esz);
            size_t span = (size_t)count * esz * (size_t)p;
            fill_bytes(in, span, cseed + (uint64_t)r);
            fill_bytes(a, span, cseed + 1000 + (uint64_t)r);
            memcpy(b, a, span);
            /* A derived receive type with a contiguous send type on some
             * ranks (same signature). Not for Open MPI's alltoall: its
             * Bruck algorithm (its own choice for small blocks above 12
             * ranks) returns wrong data when the send and receive type
             * maps differ, and what it returns depends on memory it did
             * not write, so two of its calls need not agree. */
            int mixed = derived && derived_root_only && r % 2 && (coll == C_ALLGATHER || is_mpich);
            MPI_Datatype sdt = mixed ? MPI_INT : dt;
            int scount = sdt == MPI_INT && derived ? count * ints_per : count;
            if (in_place) {
                in_place_cases++;
                if (coll == C_ALLGATHER) {
                    /* Own block already in place. */
                    memcpy(a + (size_t)r * (size_t)count * esz, in, (size_t)count * esz);
                    memcpy(b + (size_t)r * (size_t)count * esz, in, (size_t)count * esz);
                    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, a, count, dt, comm);
                    PMPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, count, dt, comm);
                } else {
                    memcpy(a, in, span);
                    memcpy(b, in, span);
                    MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, a, count, dt, comm);
                    PMPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, count, dt, comm);
                }
            } else if (coll == C_ALLGATHER) {
                MPI_Allgather(in, scount, sdt, a, count, dt, comm);
                PMPI_Allgather(in, scount, sdt, b, count, dt, comm);
            } else {
                MPI_Alltoall(in, scount, sdt, a, count, dt, comm);
                PMPI_Alltoall(in, scount, sdt, b, count, dt, comm);
            }
            if (memcmp(a, b, span) != 0)
                report("data", coll, bytes, kind);
            break;
        }
        case C_BARRIER:
            MPI_Barrier(comm);
            PMPI_Barrier(comm);
            break;
        }
    }
    long total = 0, all_mis = 0;
    for (int i = 0; i < C_N; i++)
        total += cases_run[i];
    PMPI_Allreduce(&mismatches, &all_mis, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (world_rank == 0) {
        printf("check: %d ranks, %ld cases on rank 0 (bcast %ld, reduce %ld, allreduce %ld, allgather %ld, "
               "alltoall %ld, barrier %ld; in place %ld, derived types %ld, user op %ld, short-int pairs %ld, aliased %ld, invalid op %ld): %ld mismatches\n",
               wsize, total, cases_run[0], cases_run[1], cases_run[2], cases_run[3], cases_run[4],
               cases_run[5], in_place_cases, derived_cases, user_op_cases, pair_cases, aliased_cases, invalid_cases,
               all_mis);
    }
    for (int i = 1; i < 5; i++)
        if (comms[i] != MPI_COMM_NULL)
            MPI_Comm_free(&comms[i]);
    MPI_Comm_free(&errcomm);
    MPI_Type_free(&revp);
    MPI_Type_free(&vecr);
    MPI_Type_free(&vec);
    MPI_Op_free(&uop);
    free(in);
    free(a);
    free(b);
    free(in2);
    free(absum);
    MPI_Finalize();
    return all_mis ? 1 : 0;
}
