/* ngcoll_shim.c: the MPI-typed half of libngcoll, compiled once per MPI
 * ABI (Open MPI and MPICH handles differ: pointers against ints) by the
 * build script of ngcoll/openmpi and ngcoll/mpich with that MPI's mpicc.
 *
 * Everything here is a thin wrapper over one PMPI_ call that trades the
 * ABI's handle types for uintptr_t, so the algorithms, the choice and the
 * state (Rust, crate ngcoll) are written once. Requests travel as uint64_t
 * slots (an MPI_Request fits in 8 bytes in both ABIs); arrays of them are
 * converted here, because MPICH's MPI_Request is 4 bytes wide.
 *
 * No function here allocates; every one returns the MPI error code. */
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>

#define COMM(h) ((MPI_Comm)(h))
#define TYPE(h) ((MPI_Datatype)(h))
#define OP(h) ((MPI_Op)(h))
#define BITS(x) ((uintptr_t)(x))

_Static_assert(sizeof(MPI_Request) <= sizeof(uint64_t), "MPI_Request wider than 8 bytes");
_Static_assert(sizeof(MPI_Comm) <= sizeof(uintptr_t), "MPI_Comm wider than a pointer");

/* Which MPI this shim was compiled against: 1 Open MPI, 2 MPICH, 0 other. */
int ngc_abi(void)
{
#if defined(OPEN_MPI)
    return 1;
#elif defined(MPICH_VERSION) || defined(MPICH)
    return 2;
#else
    return 0;
#endif
}

uintptr_t ngc_comm_world(void) { return BITS(MPI_COMM_WORLD); }
uintptr_t ngc_comm_null(void) { return BITS(MPI_COMM_NULL); }
uintptr_t ngc_type_byte(void) { return BITS(MPI_BYTE); }
uintptr_t ngc_type_int(void) { return BITS(MPI_INT); }
uintptr_t ngc_in_place(void) { return BITS(MPI_IN_PLACE); }
uintptr_t ngc_op_min(void) { return BITS(MPI_MIN); }
uintptr_t ngc_bottom(void) { return BITS(MPI_BOTTOM); }
int ngc_err_intern(void) { return MPI_ERR_INTERN; }

/* Fortran handles (INTEGER) to C ones, as the library's Fortran bindings
 * convert them (ngcoll::fortran). */
_Static_assert(sizeof(MPI_Fint) == sizeof(int), "MPI_Fint is not an int");
#if defined(OPEN_MPI)
#define F2C(kind, f) PMPI_##kind##_f2c(f)
#else
#define F2C(kind, f) MPI_##kind##_f2c(f)
#endif
uintptr_t ngc_f_comm(int f) { return BITS(F2C(Comm, (MPI_Fint)f)); }
uintptr_t ngc_f_type(int f) { return BITS(F2C(Type, (MPI_Fint)f)); }
uintptr_t ngc_f_op(int f) { return BITS(F2C(Op, (MPI_Fint)f)); }

/* 1 if more than one thread may call MPI at a time (the thread level
 * provided is MPI_THREAD_MULTIPLE, or cannot be asked). */
int ngc_thread_multiple(void)
{
    int provided = MPI_THREAD_MULTIPLE;
    if (PMPI_Query_thread(&provided) != MPI_SUCCESS)
        return 1;
    return provided == MPI_THREAD_MULTIPLE;
}

int ngc_library_version(char *out, int cap)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    int rc = PMPI_Get_library_version(v, &len);
    if (rc != MPI_SUCCESS)
        return rc;
    if (len >= cap)
        len = cap - 1;
    memcpy(out, v, (size_t)len);
    out[len] = 0;
    return MPI_SUCCESS;
}

int ngc_initialized(void)
{
    int flag = 0;
    PMPI_Initialized(&flag);
    return flag;
}

/* ---- communicators ---- */

int ngc_comm_size(uintptr_t comm, int *size) { return PMPI_Comm_size(COMM(comm), size); }
int ngc_comm_rank(uintptr_t comm, int *rank) { return PMPI_Comm_rank(COMM(comm), rank); }
int ngc_comm_test_inter(uintptr_t comm, int *flag) { return PMPI_Comm_test_inter(COMM(comm), flag); }

/* The shadow of a program's communicator, with the program's error
 * handler. The duplicate itself runs with errors returned (the program's
 * handler, fatal by default, is put back after): a library out of
 * communicators refuses it on every rank alike, and the program's
 * collectives then pass through instead of aborting. */
int ngc_comm_dup(uintptr_t comm, uintptr_t *out)
{
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Errhandler eh;
    int rc = PMPI_Comm_get_errhandler(COMM(comm), &eh);
    if (rc != MPI_SUCCESS)
        return rc;
    PMPI_Comm_set_errhandler(COMM(comm), MPI_ERRORS_RETURN);
    rc = PMPI_Comm_dup(COMM(comm), &c);
    PMPI_Comm_set_errhandler(COMM(comm), eh);
    /* The shadow's errors go where the program's would. */
    if (rc == MPI_SUCCESS)
        PMPI_Comm_set_errhandler(c, eh);
    PMPI_Errhandler_free(&eh);
    *out = BITS(c);
    return rc;
}

/* MPI_T_init_thread at the thread level MPI runs at: Open MPI 4.1's sets
 * the level MPI_Query_thread reports to the one asked for here. */
static int tools_init(void)
{
    int level = MPI_THREAD_SINGLE, provided = 0, up = 0, down = 0;
    /* Only between MPI_Init and MPI_Finalize (MPI_Query_thread's). */
    if (PMPI_Initialized(&up) != MPI_SUCCESS || !up || PMPI_Finalized(&down) != MPI_SUCCESS || down)
        return MPI_ERR_OTHER;
    if (PMPI_Query_thread(&level) != MPI_SUCCESS)
        level = MPI_THREAD_SINGLE;
    return MPI_T_init_thread(level, &provided);
}

/* MPI_T held open from MPI_Init to MPI_Finalize where libngcoll forces the
 * library's algorithms: Open MPI registers every framework's variables
 * again each time the tools interface goes from closed to open, which the
 * reads and duplicates below would otherwise pay each time. */
static int tools_held;

void ngc_tools_hold(void)
{
    if (!tools_held && tools_init() == MPI_SUCCESS)
        tools_held = 1;
}

void ngc_tools_release(void)
{
    if (tools_held) {
        MPI_T_finalize();
        tools_held = 0;
    }
}

/* The MPI_T control variable `name` (bound to no object): its index, a
 * handle and the handle's element count; the handle is allocated only on
 * success. */
static int cvar_open(const char *name, int *idx, MPI_T_cvar_handle *h, int *count)
{
    int rc = MPI_T_cvar_get_index(name, idx);
    if (rc != MPI_SUCCESS)
        return rc;
    return MPI_T_cvar_handle_alloc(*idx, NULL, h, count);
}

/* The handle of the one-element control variable `name`, or an error. */
static int cvar_handle(const char *name, int *idx, MPI_T_cvar_handle *h)
{
    int count = 0;
    int rc = cvar_open(name, idx, h, &count);
    if (rc == MPI_SUCCESS && count != 1) {
        MPI_T_cvar_handle_free(h);
        rc = MPI_ERR_OTHER;
    }
    return rc;
}

/* Reads the control variable `name`, an integer or a boolean (Open MPI's
 * are one byte wide), into *value. */
int ngc_cvar_read_int(const char *name, int *value)
{
    int rc = tools_init();
    if (rc != MPI_SUCCESS)
        return rc;
    int idx = 0, size = 0;
    MPI_T_cvar_handle h;
    rc = cvar_handle(name, &idx, &h);
    if (rc == MPI_SUCCESS) {
        union {
            unsigned char b;
            int i;
            long long l;
        } v;
        memset(&v, 0, sizeof v);
        MPI_Datatype t = MPI_DATATYPE_NULL;
        if ((rc = MPI_T_cvar_get_info(idx, NULL, &(int){0}, &(int){0}, &t, &(MPI_T_enum){0}, NULL,
                                      &(int){0}, &(int){0}, &(int){0})) == MPI_SUCCESS &&
            (rc = PMPI_Type_size(t, &size)) == MPI_SUCCESS && size >= 1 &&
            size <= (int)sizeof v && (rc = MPI_T_cvar_read(h, &v)) == MPI_SUCCESS)
            *value = size == 1 ? (int)v.b : size == (int)sizeof(int) ? v.i : (int)v.l;
        else if (rc == MPI_SUCCESS)
            rc = MPI_ERR_TYPE;
        MPI_T_cvar_handle_free(&h);
    }
    MPI_T_finalize();
    return rc;
}

/* Whether the string control variable `name` is empty (or unset): 1, 0,
 * or -1 if it cannot be read. */
int ngc_cvar_string_empty(const char *name)
{
    int idx = 0, count = 0, out = -1;
    if (tools_init() != MPI_SUCCESS)
        return -1;
    MPI_T_cvar_handle h;
    if (cvar_open(name, &idx, &h, &count) == MPI_SUCCESS) {
        char buf[4096];
        if (count > 0 && count <= (int)sizeof buf) {
            memset(buf, 0, sizeof buf);
            if (MPI_T_cvar_read(h, buf) == MPI_SUCCESS)
                out = buf[0] == 0;
        }
        MPI_T_cvar_handle_free(&h);
    }
    MPI_T_finalize();
    return out;
}

/* A duplicate of `comm` made while the n integer control variables
 * names[i] hold values[i] (Open MPI's coll/tuned reads its forced
 * algorithm for a communicator when the communicator is made); each is
 * given its old value back afterwards. The duplicate is made whatever the
 * writes did (it is collective: every rank must take part); a failed
 * write or restore is returned after it, so the caller can let it go on
 * every rank. Its errors return (the caller hands them to the program's
 * communicator). At most 8 variables (more: no duplicate, on every rank
 * alike, since n is the same on every rank). */
int ngc_comm_dup_forced(uintptr_t comm, int n, const char *const *names, const int *values,
                        uintptr_t *out)
{
    enum { MAX = 8 };
    MPI_T_cvar_handle h[MAX];
    int old[MAX], held = 0, bad = MPI_SUCCESS;
    if (n < 0 || n > MAX)
        return MPI_ERR_ARG;
    int rc = tools_init();
    int tools = rc == MPI_SUCCESS;
    if (!tools)
        bad = rc;
    for (int i = 0; tools && i < n && bad == MPI_SUCCESS; i++) {
        int idx = 0;
        if ((rc = cvar_handle(names[i], &idx, &h[held])) != MPI_SUCCESS) {
            bad = rc;
            break;
        }
        if ((rc = MPI_T_cvar_read(h[held], &old[held])) != MPI_SUCCESS) {
            MPI_T_cvar_handle_free(&h[held]);
            bad = rc;
            break;
        }
        held++;
        if ((rc = MPI_T_cvar_write(h[held - 1], &values[i])) != MPI_SUCCESS)
            bad = rc;
    }
    rc = ngc_comm_dup(comm, out);
    if (rc == MPI_SUCCESS)
        PMPI_Comm_set_errhandler(COMM(*out), MPI_ERRORS_RETURN);
    for (int i = held - 1; i >= 0; i--) {
        int w = MPI_T_cvar_write(h[i], &old[i]);
        if (w != MPI_SUCCESS && bad == MPI_SUCCESS)
            bad = w;
        MPI_T_cvar_handle_free(&h[i]);
    }
    if (tools)
        MPI_T_finalize();
    return rc != MPI_SUCCESS ? rc : bad;
}

/* Hands the error `code` of a call made on libngcoll's duplicate to the
 * program's communicator `comm`, as the library would have: its error
 * handler runs (and may abort); returns what the call returns. */
int ngc_comm_call_errhandler(uintptr_t comm, int code)
{
    PMPI_Comm_call_errhandler(COMM(comm), code);
    return code;
}

int ngc_comm_free(uintptr_t comm)
{
    MPI_Comm c = COMM(comm);
    return PMPI_Comm_free(&c);
}

int ngc_comm_disconnect(uintptr_t comm)
{
    MPI_Comm c = COMM(comm);
    return PMPI_Comm_disconnect(&c);
}

/* World ranks of ranks 0..n-1 of `comm` into out[0..n). */
int ngc_world_ranks(uintptr_t comm, int n, int *out)
{
    MPI_Group g, w;
    int rc = PMPI_Comm_group(COMM(comm), &g);
    if (rc != MPI_SUCCESS)
        return rc;
    rc = PMPI_Comm_group(MPI_COMM_WORLD, &w);
    if (rc != MPI_SUCCESS) {
        PMPI_Group_free(&g);
        return rc;
    }
    /* Translate in chunks: the ranks array lives on the stack. */
    int in[256];
    for (int base = 0; base < n && rc == MPI_SUCCESS; base += 256) {
        int k = n - base < 256 ? n - base : 256;
        for (int i = 0; i < k; i++)
            in[i] = base + i;
        rc = PMPI_Group_translate_ranks(g, k, in, w, out + base);
    }
    PMPI_Group_free(&g);
    PMPI_Group_free(&w);
    return rc;
}

/* ---- attribute caching (the per-communicator state) ---- */

typedef void (*ngc_free_fn)(void *);

static int ngc_delete_attr(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    (void)comm;
    (void)keyval;
    /* extra_state carries the Rust function that releases the state. */
    if (extra != NULL && attr != NULL)
        ((ngc_free_fn)extra)(attr);
    return MPI_SUCCESS;
}

int ngc_keyval_create(void (*free_fn)(void *), int *keyval)
{
    return PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, ngc_delete_attr, keyval,
                                   (void *)free_fn);
}

int ngc_keyval_free(int keyval)
{
    int k = keyval;
    return PMPI_Comm_free_keyval(&k);
}

int ngc_attr_get(uintptr_t comm, int keyval, void **val, int *flag)
{
    return PMPI_Comm_get_attr(COMM(comm), keyval, (void *)val, flag);
}

int ngc_attr_set(uintptr_t comm, int keyval, void *val)
{
    return PMPI_Comm_set_attr(COMM(comm), keyval, val);
}

/* ---- datatypes and operations ---- */

/* Whether t's data, in the order of its type map, is its memory in
 * increasing address order: a predefined type, or a duplicate, contiguous
 * repetition or resizing of such a type (the caller's size and extent
 * checks then rule out holes, gaps and overlaps). Any other constructor
 * (indexed, struct, vector, subarray, …) may permute or repeat its
 * elements and counts as out of order; at depth 8 too. */
static int in_order(MPI_Datatype t, int depth)
{
    int ni, na, nd, combiner;
    if (depth > 8 || PMPI_Type_get_envelope(t, &ni, &na, &nd, &combiner) != MPI_SUCCESS)
        return 0;
    if (combiner == MPI_COMBINER_NAMED)
        return 1;
    if ((combiner != MPI_COMBINER_DUP && combiner != MPI_COMBINER_CONTIGUOUS &&
         combiner != MPI_COMBINER_RESIZED) ||
        ni > 1 || na > 2 || nd != 1)
        return 0;
    int ints[1];
    MPI_Aint addrs[2];
    MPI_Datatype old;
    if (PMPI_Type_get_contents(t, ni, na, nd, ints, addrs, &old) != MPI_SUCCESS)
        return 0;
    int ok = in_order(old, depth + 1);
    /* A derived type returned by get_contents is a new handle to free. */
    int oi, oa, od, oc;
    if (PMPI_Type_get_envelope(old, &oi, &oa, &od, &oc) == MPI_SUCCESS && oc != MPI_COMBINER_NAMED)
        PMPI_Type_free(&old);
    return ok;
}

/* size: bytes of data in one element; extent: its stride; data_end: where
 * an element's data ends from its address (true lb + true extent; past
 * size where the data has a hole, as MPI_SHORT_INT's); contiguous: one
 * element is `size` bytes at the element's address, in its type map's
 * order, and elements follow each other without gaps (so count elements
 * are one byte range, sent as it lies); predefined: a named (basic) type. */
/* The reduction class of a predefined type, as the MPI standard groups
 * them for the predefined operations (ngcoll::mpi::TypeClass): 1 C
 * integer, 2 Fortran integer, 3 floating point, 4 complex, 5 logical,
 * 6 byte, 7 a pair of integers, 8 a pair with a floating-point value; 0
 * any other (a reduction on it goes to the library, which judges it). */
static int type_class(MPI_Datatype t)
{
    static const struct {
        int class;
        MPI_Datatype t;
    } known[] = {
        {1, MPI_INT},           {1, MPI_LONG},           {1, MPI_SHORT},
        {1, MPI_UNSIGNED_SHORT}, {1, MPI_UNSIGNED},       {1, MPI_UNSIGNED_LONG},
        {1, MPI_LONG_LONG_INT}, {1, MPI_LONG_LONG},      {1, MPI_UNSIGNED_LONG_LONG},
        {1, MPI_SIGNED_CHAR},   {1, MPI_UNSIGNED_CHAR},  {1, MPI_INT8_T},
        {1, MPI_INT16_T},       {1, MPI_INT32_T},        {1, MPI_INT64_T},
        {1, MPI_UINT8_T},       {1, MPI_UINT16_T},       {1, MPI_UINT32_T},
        {1, MPI_UINT64_T},      {1, MPI_AINT},           {1, MPI_OFFSET},
        {1, MPI_COUNT},         {2, MPI_INTEGER},        {3, MPI_FLOAT},
        {3, MPI_DOUBLE},        {3, MPI_LONG_DOUBLE},    {3, MPI_REAL},
        {3, MPI_DOUBLE_PRECISION}, {4, MPI_C_FLOAT_COMPLEX}, {4, MPI_C_DOUBLE_COMPLEX},
        {4, MPI_C_LONG_DOUBLE_COMPLEX}, {4, MPI_COMPLEX}, {4, MPI_DOUBLE_COMPLEX},
        {5, MPI_C_BOOL},        {5, MPI_LOGICAL},        {6, MPI_BYTE},
        {7, MPI_2INT},          {7, MPI_SHORT_INT},      {7, MPI_LONG_INT},
        {7, MPI_2INTEGER},      {8, MPI_FLOAT_INT},      {8, MPI_DOUBLE_INT},
        {8, MPI_LONG_DOUBLE_INT}, {8, MPI_2REAL},        {8, MPI_2DOUBLE_PRECISION},
    };
    for (int i = 0; i < (int)(sizeof known / sizeof known[0]); i++)
        if (t == known[i].t)
            return known[i].class;
    return 0;
}

int ngc_type_info(uintptr_t type, int64_t *size, int64_t *extent, int64_t *data_end, int *contiguous,
                  int *predefined, int *class)
{
    MPI_Aint lb, ext, tlb, text;
    MPI_Count sz;
    int rc = PMPI_Type_size_x(TYPE(type), &sz);
    if (rc != MPI_SUCCESS)
        return rc;
    rc = PMPI_Type_get_extent(TYPE(type), &lb, &ext);
    if (rc != MPI_SUCCESS)
        return rc;
    rc = PMPI_Type_get_true_extent(TYPE(type), &tlb, &text);
    if (rc != MPI_SUCCESS)
        return rc;
    int ni, na, nd, combiner;
    rc = PMPI_Type_get_envelope(TYPE(type), &ni, &na, &nd, &combiner);
    if (rc != MPI_SUCCESS)
        return rc;
    *size = (int64_t)sz;
    *extent = (int64_t)ext;
    *data_end = (int64_t)(tlb + text);
    *predefined = (combiner == MPI_COMBINER_NAMED);
    *class = *predefined ? type_class(TYPE(type)) : 0;
    *contiguous = (tlb == 0 && lb == 0 && (MPI_Count)text == sz && (MPI_Count)ext == sz) &&
                  (*predefined || in_order(TYPE(type), 0));
    return MPI_SUCCESS;
}

/* 0: not a predefined reduction operation (user-defined, MPI_REPLACE,
 * MPI_NO_OP), else 1 + its index in this list. All of them commute. */
int ngc_op_kind(uintptr_t op)
{
    MPI_Op o = OP(op);
    const MPI_Op known[] = {MPI_SUM,  MPI_PROD, MPI_MAX,  MPI_MIN,    MPI_LAND,   MPI_LOR,
                            MPI_LXOR, MPI_BAND, MPI_BOR,  MPI_BXOR,   MPI_MAXLOC, MPI_MINLOC};
    for (int i = 0; i < (int)(sizeof known / sizeof known[0]); i++)
        if (o == known[i])
            return i + 1;
    return 0;
}

int ngc_reduce_local(const void *in, void *inout, int count, uintptr_t type, uintptr_t op)
{
    return PMPI_Reduce_local(in, inout, count, TYPE(type), OP(op));
}

/* A buffer at MPI_BOTTOM (a datatype of absolute addresses) is copied by a
 * message to this rank on ngcoll's shadow communicator (no other message
 * there carries this tag), received as or sent from MPI_PACKED: MPICH's
 * PMPI_Pack and PMPI_Unpack refuse a null buffer, which the standard
 * allows; a message with any datatype may be received as MPI_PACKED and
 * is then the bytes PMPI_Unpack reads. */
enum { NGC_TAG_SELF = 7107 };

static int self_copy(const void *in, int in_count, MPI_Datatype in_type, void *out, int out_count,
                     MPI_Datatype out_type, MPI_Comm comm, int *received)
{
    int me, rc = PMPI_Comm_rank(comm, &me);
    if (rc != MPI_SUCCESS)
        return rc;
    MPI_Status st;
    rc = PMPI_Sendrecv(in, in_count, in_type, me, NGC_TAG_SELF, out, out_count, out_type, me,
                       NGC_TAG_SELF, comm, &st);
    if (rc == MPI_SUCCESS && received != NULL)
        rc = PMPI_Get_count(&st, out_type, received);
    return rc;
}

int ngc_pack(const void *in, int count, uintptr_t type, void *out, int64_t out_bytes,
             int64_t *position, uintptr_t comm)
{
    int pos = 0;
    if (out_bytes > INT32_MAX)
        return MPI_ERR_COUNT;
    int rc;
    if (in == MPI_BOTTOM && count > 0)
        rc = self_copy(in, count, TYPE(type), out, (int)out_bytes, MPI_PACKED, COMM(comm), &pos);
    else
        rc = PMPI_Pack(in, count, TYPE(type), out, (int)out_bytes, &pos, COMM(comm));
    *position = pos;
    return rc;
}

int ngc_unpack(const void *in, int64_t in_bytes, void *out, int count, uintptr_t type,
               uintptr_t comm)
{
    int pos = 0;
    if (in_bytes > INT32_MAX)
        return MPI_ERR_COUNT;
    if (out == MPI_BOTTOM && count > 0)
        return self_copy(in, (int)in_bytes, MPI_PACKED, out, count, TYPE(type), COMM(comm), NULL);
    return PMPI_Unpack(in, (int)in_bytes, &pos, out, count, TYPE(type), COMM(comm));
}

/* ---- point to point (on ngcoll's shadow communicators) ---- */

/* Stores request r in the caller's 8-byte slot (a handle may be smaller). */
static void to_slot(MPI_Request r, uint64_t *slot)
{
    memset(slot, 0, sizeof *slot);
    memcpy(slot, &r, sizeof r);
}

int ngc_isend(const void *buf, int count, uintptr_t type, int dest, int tag, uintptr_t comm,
              uint64_t *slot)
{
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = PMPI_Isend(buf, count, TYPE(type), dest, tag, COMM(comm), &r);
    to_slot(r, slot);
    return rc;
}

int ngc_irecv(void *buf, int count, uintptr_t type, int src, int tag, uintptr_t comm,
              uint64_t *slot)
{
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = PMPI_Irecv(buf, count, TYPE(type), src, tag, COMM(comm), &r);
    to_slot(r, slot);
    return rc;
}

/* Completes n requests. polite != 0: poll with PMPI_Testall and give the
 * core away (sched_yield) between polls, for ranks that share cores: a
 * waiter that spins keeps the rank it waits for off the core. */
int ngc_waitall(uint64_t *slots, int n, int polite)
{
    enum { CHUNK = 64 };
    MPI_Request reqs[CHUNK];
    for (int base = 0; base < n; base += CHUNK) {
        int k = n - base < CHUNK ? n - base : CHUNK;
        for (int i = 0; i < k; i++)
            memcpy(&reqs[i], &slots[base + i], sizeof reqs[i]);
        int rc;
        if (polite) {
            int done = 0;
            for (;;) {
                rc = PMPI_Testall(k, reqs, &done, MPI_STATUSES_IGNORE);
                if (rc != MPI_SUCCESS || done)
                    break;
                sched_yield();
            }
        } else {
            rc = PMPI_Waitall(k, reqs, MPI_STATUSES_IGNORE);
        }
        if (rc != MPI_SUCCESS)
            return rc;
    }
    return MPI_SUCCESS;
}

/* ---- the few collectives libngcoll itself needs (setup only) ---- */

int ngc_allgather_bytes(const void *send, int n, void *recv, uintptr_t comm)
{
    return PMPI_Allgather(send, n, MPI_BYTE, recv, n, MPI_BYTE, COMM(comm));
}

int ngc_allreduce_min_int(int in, int *out, uintptr_t comm)
{
    return PMPI_Allreduce(&in, out, 1, MPI_INT, MPI_MIN, COMM(comm));
}

int ngc_allreduce_sum_double2(const double *in, double *out, uintptr_t comm)
{
    return PMPI_Allreduce(in, out, 2, MPI_DOUBLE, MPI_SUM, COMM(comm));
}

int ngc_bcast_bytes(void *buf, int n, int root, uintptr_t comm)
{
    return PMPI_Bcast(buf, n, MPI_BYTE, root, COMM(comm));
}

double ngc_wtime(void) { return PMPI_Wtime(); }
