/*
 * netgauge.h — read the LogGP / LogGPS / LogfP parameters that netgauged
 * publishes in shared memory (C11).
 *
 * The daemon keeps one segment file (default /dev/shm/netgauged). ng_open()
 * opens and maps it once (open, fstat, mmap, close); after that every lookup
 * is a handful of atomic loads: no system call, no lock, no allocation,
 * safe to call from any number of threads and processes while the daemon
 * rewrites the segment. All lookups live in the library (libnetgauge.so /
 * libnetgauge.a); this header has no inline code, so readers never touch the
 * segment's memory directly.
 *
 * Consistency: the segment holds two copies of its table under a latch
 * seqlock. A lookup retries (at most NG_MAX_RETRIES times) when the daemon
 * published during the read, so every ng_params is one consistent snapshot,
 * never a mix of two. A daemon killed mid-update leaves the previous
 * snapshot in place.
 *
 * Staleness: the daemon stores CLOCK_REALTIME (ns) in a heartbeat word every
 * second, 0 on clean shutdown. A lookup returns -ESTALE when the heartbeat
 * is 0 or older than the reader's threshold (NG_DEFAULT_STALE_AFTER_NS,
 * change with ng_set_stale_after_ns, 0 disables), when the daemon marked the
 * entry stale, or when the measurement is older than the optional maximum
 * age (ng_set_max_age_ns). "Now" is read with CLOCK_REALTIME_COARSE, which
 * glibc serves from the vDSO: no system call.
 *
 * Return codes: 0 on success, else a negative errno value:
 *   -ENOENT  unknown peer or transport (or index out of range)
 *   -ESTALE  daemon gone, entry marked stale, or data older than the limit
 *   -EAGAIN  no consistent snapshot after NG_MAX_RETRIES attempts (the
 *            daemon was publishing continuously); retry later
 *   -EINVAL  NULL argument, or the segment is corrupt / inconsistent
 *   -ERANGE  (ng_entry_name only) a buffer is too small
 *
 * Link: cc prog.c $(pkg-config --cflags --libs netgauge)
 *       (static: pkg-config --static --libs netgauge)
 */
#ifndef NETGAUGE_H
#define NETGAUGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** ABI this header describes: ng_abi_version() == (MAJOR << 16 | MINOR). */
#define NG_ABI_MAJOR 1
#define NG_ABI_MINOR 0

/** Default segment path; overridden by $NETGAUGE_SEGMENT when ng_open(NULL). */
#define NG_DEFAULT_PATH "/dev/shm/netgauged"
#define NG_PATH_ENV "NETGAUGE_SEGMENT"
/** Default heartbeat threshold: 5 s (the daemon beats every second). */
#define NG_DEFAULT_STALE_AFTER_NS 5000000000ULL
/** Snapshot attempts before -EAGAIN. */
#define NG_MAX_RETRIES 64

/** Name limits (bytes, without the terminating NUL). */
#define NG_PEER_MAX 63
#define NG_TRANSPORT_MAX 15

/** Transport names, as `ngctl probe --transport` takes them. */
#define NG_TRANSPORT_SIM "sim"
#define NG_TRANSPORT_UDP "udp"
#define NG_TRANSPORT_RAW "raw"
#define NG_TRANSPORT_RDMA "rdma"
#define NG_TRANSPORT_MSG "msg"
#define NG_TRANSPORT_MPI "mpi"

/** ng_params.flags bits. */
#define NG_FLAG_VALID (1u << 0)        /* the entry holds a usable fit */
#define NG_FLAG_L_NEGATIVE (1u << 1)   /* fitted L < 0 (EEL < o_s + o_r) */
#define NG_FLAG_DEGRADED (1u << 2)     /* few samples, wide intervals, fallback clock */
#define NG_FLAG_STALE (1u << 3)        /* marked stale by the daemon (lookups: -ESTALE) */
#define NG_FLAG_HAS_LOGFP (1u << 4)    /* f, o_min, o_max, g_f are set */
#define NG_FLAG_HAS_S (1u << 5)        /* S_bytes is set */
#define NG_FLAG_HAS_LOGGPS (1u << 6)   /* some range has O_s / O_r */
#define NG_FLAG_EXTRAPOLATED (1u << 16) /* msg_bytes outside every range: nearest used */

/** Opaque reader handle. Thread-safe for lookups; the setters are not. */
typedef struct ng_reader ng_reader;

/**
 * Parameters of the protocol range that contains msg_bytes (LogGP / LogGPS /
 * LogfP, all times in ns). Overheads are size-linear (LogGPS):
 *   o_s(s) = o_s_ns + (s-1) * O_s_ns_per_byte, likewise o_r(s).
 */
typedef struct ng_params {
    double eel_ns;          /* end-to-end latency PRTT(1,0,1)/2 */
    double L_ns;            /* LogGP L = EEL - o_s - o_r (may be < 0) */
    double o_s_ns;          /* send overhead at s = 1 */
    double o_r_ns;          /* receive overhead at s = 1 */
    double g_ns;            /* gap */
    double G_ns_per_byte;   /* gap per byte */
    double O_s_ns_per_byte; /* LogGPS send overhead per byte (0 if not measured) */
    double O_r_ns_per_byte; /* LogGPS receive overhead per byte */
    double o_min_ns;        /* LogfP: o(P) = o_min + o_max / P */
    double o_max_ns;
    double g_f_ns;          /* LogfP gap per message beyond f */
    uint64_t S_bytes;       /* LogGPS rendezvous threshold; UINT64_MAX if none */
    uint64_t range_from_bytes; /* the protocol range used */
    uint64_t range_to_bytes;   /* (inclusive) */
    uint64_t measured_unix_ns; /* when it was measured, CLOCK_REALTIME ns */
    uint64_t samples;          /* samples behind the fit */
    uint32_t f;                /* LogfP f; 0 if unknown */
    uint32_t flags;            /* NG_FLAG_* */
} ng_params;

/** Segment header and daemon identity (ng_get_info). */
typedef struct ng_info {
    uint32_t abi_major;
    uint32_t abi_minor;
    uint64_t capabilities;      /* capability bits; never reused */
    uint64_t generation;        /* random per daemon start */
    uint64_t heartbeat_unix_ns; /* last heartbeat, 0 = daemon shut down */
    uint64_t seq;               /* publishes since creation */
    uint32_t writer_pid;
    uint32_t capacity_entries;
    uint32_t entry_count;
    uint32_t reserved;
    char node_name[64];         /* NUL-terminated */
    char clock_desc[128];       /* NUL-terminated */
} ng_info;

_Static_assert(sizeof(ng_params) == 136, "ng_params ABI");
_Static_assert(offsetof(ng_params, S_bytes) == 88, "ng_params ABI");
_Static_assert(offsetof(ng_params, f) == 128, "ng_params ABI");
_Static_assert(sizeof(ng_info) == 248, "ng_info ABI");

/**
 * Opens and maps the segment at path (NULL: $NETGAUGE_SEGMENT if set, else
 * NG_DEFAULT_PATH) and validates its header (magic, ABI major, sizes,
 * capability bits). Returns NULL and sets errno on failure: the open(2)
 * error (ENOENT, EACCES, ...) or EINVAL for a file that is not a valid
 * segment. The only function that makes system calls, with ng_close.
 */
ng_reader *ng_open(const char *path);

/** Unmaps and frees the reader. NULL is ignored. */
void ng_close(ng_reader *r);

/**
 * Looks up (peer, transport) and fills *out with the parameters of the
 * protocol range containing msg_bytes (the nearest range, flagged
 * NG_FLAG_EXTRAPOLATED, if none contains it).
 * Returns 0, -ENOENT, -ESTALE, -EAGAIN or -EINVAL. No system call.
 */
int ng_lookup(const ng_reader *r, const char *peer, const char *transport,
              uint64_t msg_bytes, ng_params *out);

/**
 * Predicted time (ns) of one message of msg_bytes under the model:
 *   o_s(s) + L + (s-1)*G + o_r(s)
 * plus the rendezvous handshake 2*EEL (request-to-send / clear-to-send
 * round trip) when the entry has S and s > S. NaN on any error.
 */
double ng_predict_ns(const ng_reader *r, const char *peer, const char *transport,
                     uint64_t msg_bytes);

/**
 * Index of (peer, transport) for the fast path: >= 0, or -ENOENT, -EAGAIN,
 * -EINVAL. Indices never change for the life of a segment (entries are
 * never moved or removed), so resolve once and keep the index.
 */
int ng_index(const ng_reader *r, const char *peer, const char *transport);

/** ng_lookup by index (no hashing, no string compare). Same return codes. */
int ng_lookup_index(const ng_reader *r, int index, uint64_t msg_bytes, ng_params *out);

/** ng_predict_ns by index. NaN on error. */
double ng_predict_index_ns(const ng_reader *r, int index, uint64_t msg_bytes);

/** The model prediction for already looked-up parameters. NaN if p is NULL. */
double ng_params_predict_ns(const ng_params *p, uint64_t msg_bytes);

/** Number of entries (>= 0), or -EAGAIN / -EINVAL. Entries are 0..n-1. */
int ng_entry_count(const ng_reader *r);

/**
 * Copies the names of entry index (NUL-terminated). Returns 0, -ENOENT,
 * -ERANGE (buffer too small; NG_PEER_MAX+1 and NG_TRANSPORT_MAX+1 always
 * suffice), -EAGAIN or -EINVAL.
 */
int ng_entry_name(const ng_reader *r, int index, char *peer, size_t peer_cap,
                  char *transport, size_t transport_cap);

/** Header and daemon identity. Returns 0, -EAGAIN or -EINVAL. */
int ng_get_info(const ng_reader *r, ng_info *out);

/** Nanoseconds since the last heartbeat; -1 if the daemon shut down. */
int64_t ng_heartbeat_age_ns(const ng_reader *r);

/** Heartbeat threshold in ns (0 disables the heartbeat rule). Not thread-safe. */
void ng_set_stale_after_ns(ng_reader *r, uint64_t ns);

/** Maximum measurement age in ns (0: no limit, the default). Not thread-safe. */
void ng_set_max_age_ns(ng_reader *r, uint64_t ns);

/** (NG_ABI_MAJOR << 16) | NG_ABI_MINOR of the library. */
uint32_t ng_abi_version(void);

/** A static English description of a return code. Never NULL. */
const char *ng_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif /* NETGAUGE_H */
