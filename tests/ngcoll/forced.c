/* forced.c: libngcoll's runs of Open MPI's other algorithms (a duplicate
 * of the communicator made with coll/tuned's algorithm forced through
 * MPI_T) really run that algorithm, and leave the library as they found it.
 *
 * Observable without a clock: a sum of doubles whose value depends on the
 * order the ranks' vectors are combined in. Open MPI's basic linear reduce
 * (coll/tuned algorithm 1) combines v0 + (v1 + (... + v_{P-1})), from the
 * last rank down; with values 1, -1e16, 1, 1e16, 0, ... that is 1, while
 * the binary tree Open MPI's fixed rules choose for small messages gives
 * another value (asserted here too, so the test tells the two apart).
 *
 * Usage (Open MPI, 4 ranks, libngcoll preloaded):
 *   forced expect-linear   NETGAUGE_COLL_FORCE=reduce=library:1: MPI_Reduce
 *                          gives the linear order's sum; PMPI_Reduce (the
 *                          library's own on MPI_COMM_WORLD) and PMPI_Reduce
 *                          on a duplicate the program makes afterwards give
 *                          the fixed rules' sum; the control variable is
 *                          back to 0; dynamic rules on.
 *   forced expect-library  NETGAUGE_COLL_LIBRARY_ALGS=0 or the dynamic rules
 *                          left off by the program: MPI_Reduce gives the
 *                          fixed rules' sum, and the dynamic rules are off
 *                          (libngcoll did not turn them on).
 * Prints one line "forced: ..." on rank 0; exits non-zero on a failure. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

/* The control variable `name`, an integer or a boolean (one byte in Open
 * MPI), in *value; 0 on success. */
static int read_int_cvar(const char *name, int *value)
{
    int idx, count, provided, size = 0;
    MPI_Datatype type;
    MPI_T_cvar_handle h;
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level); /* Open MPI's MPI_T_init_thread sets it */
    if (MPI_T_init_thread(level, &provided) != MPI_SUCCESS)
        return -1;
    int rc = -1;
    if (MPI_T_cvar_get_index(name, &idx) == MPI_SUCCESS &&
        MPI_T_cvar_get_info(idx, NULL, &(int){0}, &(int){0}, &type, &(MPI_T_enum){0}, NULL,
                            &(int){0}, &(int){0}, &(int){0}) == MPI_SUCCESS &&
        MPI_Type_size(type, &size) == MPI_SUCCESS &&
        MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) == MPI_SUCCESS) {
        union {
            unsigned char b;
            int i;
        } v = {0};
        v.i = 0;
        if (count == 1 && (size == 1 || size == (int)sizeof(int)) && MPI_T_cvar_read(h, &v) == MPI_SUCCESS) {
            *value = size == 1 ? v.b : v.i;
            rc = 0;
        }
        MPI_T_cvar_handle_free(&h);
    }
    MPI_T_finalize();
    return rc;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int linear_expected = argc > 1 && !strcmp(argv[1], "expect-linear");
    if (argc < 2 || (!linear_expected && strcmp(argv[1], "expect-library"))) {
        if (rank == 0)
            fprintf(stderr, "usage: forced expect-linear|expect-library\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const double values[] = {1.0, -1e16, 1.0, 1e16};
    double mine = rank < 4 ? values[rank] : 0.0;
    /* v0 + (v1 + (... + v_{P-1})), as the basic linear reduce combines. */
    double linear = 0.0;
    for (int r = size - 1; r >= 0; r--) {
        double v = r < 4 ? values[r] : 0.0;
        linear = r == size - 1 ? v : v + linear;
    }
    double ours = 0.0, own = 0.0, later = 0.0;
    /* Twice: the first call of the class makes the duplicate. */
    for (int i = 0; i < 2; i++)
        MPI_Reduce(&mine, &ours, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    PMPI_Reduce(&mine, &own, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    PMPI_Reduce(&mine, &later, 1, MPI_DOUBLE, MPI_SUM, 0, dup);
    MPI_Comm_free(&dup);
    int forced_alg = -1, dynamic = -1;
    int cvars = read_int_cvar("coll_tuned_reduce_algorithm", &forced_alg) == 0 &&
                read_int_cvar("coll_tuned_use_dynamic_rules", &dynamic) == 0;
    int fail = 0;
    if (rank == 0) {
        char why[512] = "";
        if (!dlsym(RTLD_DEFAULT, "ngcoll_abi"))
            snprintf(why, sizeof why, "libngcoll is not loaded");
        else if (linear == own)
            snprintf(why, sizeof why, "the fixed rules' sum %g is the linear order's: the test cannot tell them apart", own);
        else if (linear_expected && ours != linear)
            snprintf(why, sizeof why, "MPI_Reduce gave %g, not the linear order's %g (the library's own: %g)", ours, linear, own);
        else if (!linear_expected && ours != own)
            snprintf(why, sizeof why, "MPI_Reduce gave %g, not the library's own %g", ours, own);
        else if (later != own)
            snprintf(why, sizeof why, "a duplicate made afterwards reduced to %g, not %g: the forced algorithm leaked", later, own);
        else if (!cvars || forced_alg != 0)
            snprintf(why, sizeof why, "coll_tuned_reduce_algorithm is %d after libngcoll's duplicate, not 0", forced_alg);
        else if (dynamic != (linear_expected ? 1 : 0))
            snprintf(why, sizeof why, "coll_tuned_use_dynamic_rules is %d, not %d", dynamic,
                     linear_expected);
        fail = why[0] != 0;
        printf("forced: %s, %d ranks: MPI_Reduce %g, linear order %g, library's own %g, a later duplicate %g; "
               "coll_tuned_reduce_algorithm %d, dynamic rules %d: %s\n",
               argv[1], size, ours, linear, own, later, forced_alg, dynamic, fail ? why : "ok");
    }
    MPI_Bcast(&fail, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return fail;
}
