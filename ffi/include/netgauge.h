/*
 * netgauge.h — read the LogGP / LogGPS / LogfP parameters that netgauged
 * publishes in shared memory (C11).
 *
 * The daemon keeps one segment file (default /run/netgauged/segment, in a
 * directory only the daemon may write). ng_open() opens and maps it once
 * (open, fstat, pread, mmap, close); after that every lookup
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
 *   -ERANGE  (ng_entry_name, ng_peer_class) a buffer is too small
 *
 * ABI 1.1 (NG_ABI_MINOR 1) appends, and changes nothing of 1.0: every 1.0
 * function, struct and flag keeps its meaning, and a program built against
 * the 1.0 header reads a 1.1 segment unchanged. What 1.1 adds:
 *   - a status per parameter: identified, or the reason it is not
 *     (ng_ident, NG_STATUS_*), and the flags NG_FLAG_UNIDENTIFIED,
 *     NG_FLAG_RESTORED, NG_FLAG_CHANGED, NG_FLAG_UNSTABLE, NG_FLAG_SHAPED;
 *   - per entry: the sustained and burst bandwidth, half-round-trip
 *     percentiles, CPU overlap per range, provenance times (ng_get_entry_ext);
 *   - per transport: bandwidth-sharing penalties, the sharing fit and the
 *     last effective bisection bandwidth (ng_get_transport_ext);
 *   - coverage classes: entries named "@class" and a peer -> class map, so
 *     a peer without an entry of its own is answered from its class,
 *     flagged NG_FLAG_CLASS (ng_lookup_or_class, ng_index_or_class).
 * On a 1.0 segment the new data reads as absent (ng_get_entry_ext: present 0;
 * ng_get_transport_ext, ng_peer_class: -ENOENT; ng_lookup_or_class behaves as
 * ng_lookup).
 *
 * ABI 1.2 (NG_ABI_MINOR 2) adds no function and changes no struct: the
 * segment carries a dense "hot table" after the two copies (capability
 * NG_CAP_HOT), per entry the words ng_lookup_index, ng_predict_index_ns and
 * ng_lookup_index_status return, contiguous for all entries, so that an
 * index lookup reads 3 cache lines instead of 5-6 scattered over a page of
 * its own. This library reads it when the segment has it and the entry
 * otherwise (1.0 and 1.1 segments); 1.0 and 1.1 readers never map it and
 * keep working. A corrupt record is reported as a corrupt entry (-EINVAL).
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
#define NG_ABI_MINOR 2

/** Default segment path; overridden by $NETGAUGE_SEGMENT when ng_open(NULL). */
#define NG_DEFAULT_PATH "/run/netgauged/segment"
#define NG_PATH_ENV "NETGAUGE_SEGMENT"
/**
 * Owners ng_open trusts besides root, the "netgauged" user and the caller:
 * a user name or uid, or "any" (tests, unprivileged set-ups).
 */
#define NG_OWNER_ENV "NETGAUGE_SEGMENT_OWNER"
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
/* ABI 1.1 flags. */
#define NG_FLAG_RESTORED (1u << 7)     /* from the daemon's state file, not yet confirmed by a
                                          re-check; measured_unix_ns is the original time */
#define NG_FLAG_CLASS (1u << 8)        /* the values stand for the pair's coverage class */
#define NG_FLAG_CHANGED (1u << 9)      /* a re-check disagreed; the entry was measured again */
#define NG_FLAG_UNSTABLE (1u << 10)    /* multi-modal samples or runs that disagree */
#define NG_FLAG_UNIDENTIFIED (1u << 11) /* some parameter is not identified: see ng_get_entry_ext */
#define NG_FLAG_SHAPED (1u << 12)      /* a token-bucket / credit regime was recognised */
#define NG_FLAG_EXTRAPOLATED (1u << 16) /* msg_bytes outside every range: nearest used */

/** Capability bits (ng_info.capabilities); never reused. */
#define NG_CAP_LOGGPS (1ull << 0)
#define NG_CAP_LOGFP (1ull << 1)
#define NG_CAP_CI95 (1ull << 2)
#define NG_CAP_CURVE (1ull << 3)
#define NG_CAP_HEARTBEAT_REALTIME_NS (1ull << 4)
#define NG_CAP_IDENT (1ull << 5)       /* 1.1: statuses per parameter */
#define NG_CAP_BANDWIDTH (1ull << 6)   /* 1.1: sustained / burst bandwidth */
#define NG_CAP_LATENCY (1ull << 7)     /* 1.1: half-round-trip percentiles */
#define NG_CAP_OVERLAP (1ull << 8)     /* 1.1: CPU overlap per range */
#define NG_CAP_PROVENANCE (1ull << 9)  /* 1.1: RESTORED / CHANGED / UNSTABLE, times */
#define NG_CAP_CLASSES (1ull << 10)    /* 1.1: coverage classes and the peer -> class map */
#define NG_CAP_CONTENTION (1ull << 11) /* 1.1: per-transport contention and bisection */
#define NG_CAP_HOT (1ull << 12)        /* 1.2: the hot table of the index lookups */

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

#ifdef __cplusplus
#define NG_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define NG_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif

NG_STATIC_ASSERT(sizeof(ng_params) == 136, "ng_params ABI");
NG_STATIC_ASSERT(offsetof(ng_params, S_bytes) == 88, "ng_params ABI");
NG_STATIC_ASSERT(offsetof(ng_params, f) == 128, "ng_params ABI");
NG_STATIC_ASSERT(sizeof(ng_info) == 248, "ng_info ABI");

/**
 * Opens and maps the segment at path (NULL: $NETGAUGE_SEGMENT if set, else
 * NG_DEFAULT_PATH) and validates its header (magic, ABI major, sizes,
 * capability bits) before mapping it. Never follows a symbolic link at the
 * last component and never blocks (a FIFO or device is refused at once).
 * The file must be a regular file owned by root, the "netgauged" user, the
 * caller or an owner $NETGAUGE_SEGMENT_OWNER names, and writable by its
 * owner only. Returns NULL and sets errno on failure: the open(2) error
 * (ENOENT, EACCES, ...), ELOOP for a symbolic link, EPERM for an untrusted
 * owner or a file others may write, or EINVAL for anything that is not a
 * regular file holding a valid segment. The only function that makes
 * system calls, with ng_close (and ng_get_info, which may allocate).
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

/** Header and daemon identity. Returns 0, -EAGAIN or -EINVAL. Not a
 * lookup: it may allocate (the names are read into heap strings before
 * they are copied out), so call it at set-up, not in a signal handler or
 * under a seccomp filter. */
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

/* ------------------------------------------------------------------ ABI 1.1 */

/**
 * Status codes (4 bits). 0 and 1 are statements about the value; 2..15 say
 * why it is not identified. Codes 11..14 are reserved for later minors: a
 * reader treats them as "not identified".
 */
#define NG_STATUS_NOT_ASSESSED 0   /* no statement: the value as measured */
#define NG_STATUS_IDENTIFIED 1     /* finite value with a 95 % interval around it */
#define NG_REASON_NEGATIVE 2       /* below its physical bound (negative time, gap, fraction) */
#define NG_REASON_CROSSES_ZERO 3   /* the interval reaches zero: sign unknown */
#define NG_REASON_TOO_FEW_POINTS 4 /* too few sizes or samples to fit it */
#define NG_REASON_NOT_APPLICABLE 5 /* the transport has no such parameter */
#define NG_REASON_UNSTABLE 6       /* multi-modal samples, runs disagree */
#define NG_REASON_SHAPER 7         /* a token bucket / credit regime mixes two rates */
#define NG_REASON_WIDE_INTERVAL 8  /* interval wider than the producer accepts */
#define NG_REASON_NOT_MEASURED 9   /* the measurement that yields it did not run */
#define NG_REASON_AT_BOUND 10      /* constrained fit at its bound: only an upper limit */
#define NG_REASON_OTHER 15

/** Entry-level fields of ng_ident.entry (nibble index). */
#define NG_FIELD_EEL 0
#define NG_FIELD_L 1
#define NG_FIELD_S 2
#define NG_FIELD_F 3
#define NG_FIELD_O_MIN 4
#define NG_FIELD_O_MAX 5
#define NG_FIELD_G_F 6
#define NG_FIELD_G_SUSTAINED 7     /* ng_bandwidth.sustained_G_ns_per_byte */
#define NG_FIELD_G_BURST 8         /* ng_bandwidth.burst_G_ns_per_byte */

/** Per-range fields of ng_ident.range[r] (nibble index). */
#define NG_RFIELD_G 0              /* g */
#define NG_RFIELD_G_PER_BYTE 1     /* G */
#define NG_RFIELD_O_S 2
#define NG_RFIELD_O_R 3
#define NG_RFIELD_O_S_PER_BYTE 4   /* O_s */
#define NG_RFIELD_O_R_PER_BYTE 5   /* O_r */
#define NG_RFIELD_OVERLAP_SEND 6
#define NG_RFIELD_OVERLAP_RECV 7

/** The status of field f in an ng_ident word: NG_IDENT_STATUS(id.entry, NG_FIELD_L). */
#define NG_IDENT_STATUS(word, f) ((unsigned)(((word) >> (4u * (unsigned)(f))) & 0xFu))

/** ng_entry_ext.present bits. */
#define NG_EXT_V11 (1u << 0)       /* the entry carries the 1.1 block (0 on a 1.0 segment) */
#define NG_EXT_BANDWIDTH (1u << 1)
#define NG_EXT_LATENCY (1u << 2)
#define NG_EXT_OVERLAP (1u << 3)

/** ng_bandwidth.regime. */
#define NG_REGIME_SINGLE 0         /* one rate */
#define NG_REGIME_TOKEN_BUCKET 1   /* burst_bytes at the burst rate, then the sustained rate */
#define NG_REGIME_CREDIT 2         /* a credit window of burst_bytes, then the credit rate */
/** ng_bandwidth.range_index when the sustained G is not that of a range. */
#define NG_NO_RANGE 0xFFFFFFFFu

/** ng_entry_ext.instability: the likely cause of NG_FLAG_UNSTABLE. */
#define NG_UNSTABLE_NONE 0
#define NG_UNSTABLE_SHARED_CORE 1   /* driver and responder shared a CPU core */
#define NG_UNSTABLE_MULTI_MODAL 2
#define NG_UNSTABLE_RUNS_DISAGREE 3
#define NG_UNSTABLE_INTERFERENCE 4  /* host or link disturbed during the sweep */

/** Limits of the 1.1 blocks. */
#define NG_MAX_RANGES 8
#define NG_MAX_LATENCY 8
#define NG_MAX_K 8

/** A value with its 95 % interval. Unused slots are 0; a value stated as
 *  not measured may be NaN. */
typedef struct ng_estimate {
    double value;
    double lo;
    double hi;
} ng_estimate;

/**
 * Status of every parameter, 4 bits each: NG_FIELD_f of the entry at bits
 * 4f..4f+3 of `entry`, NG_RFIELD_f of range r at bits 4f..4f+3 of
 * `range[r]`. Read with NG_IDENT_STATUS or ng_ident_status.
 */
typedef struct ng_ident {
    uint64_t entry;
    uint64_t range[NG_MAX_RANGES];
} ng_ident;

/**
 * The large-message bandwidth: the sustained gap per byte (the bandwidth is
 * 1e9 / G bytes per second) and, when a token-bucket or credit regime was
 * recognised, the burst gap per byte and how many bytes pass at it.
 */
typedef struct ng_bandwidth {
    ng_estimate sustained_G_ns_per_byte;
    ng_estimate burst_G_ns_per_byte; /* 0 with NG_REGIME_SINGLE */
    uint64_t burst_bytes;            /* 0 with NG_REGIME_SINGLE */
    uint32_t regime;                 /* NG_REGIME_* */
    uint32_t range_index;            /* protocol range of the sustained G, or NG_NO_RANGE */
} ng_bandwidth;

/** Percentiles of the half round trip PRTT(1,0,s)/2 at one size, ns. */
typedef struct ng_latency {
    uint64_t size_bytes;
    uint64_t samples;    /* below 1000 samples p999 is the maximum */
    double min_ns;
    double p50_ns;
    double p90_ns;
    double p99_ns;
    double p999_ns;
    double max_ns;
} ng_latency;

/** CPU overlap of one range: fraction (0..1) of the transfer time the
 *  sending / receiving CPU can compute (Bell et al.). */
typedef struct ng_overlap {
    ng_estimate send;
    ng_estimate recv;
} ng_overlap;

/** The ABI 1.1 part of an entry (ng_get_entry_ext). */
typedef struct ng_entry_ext {
    uint32_t present;            /* NG_EXT_* */
    uint32_t n_latency;          /* valid latency[] records */
    uint32_t n_overlap;          /* valid overlap[] records: 0 or one per range */
    uint32_t instability;        /* NG_UNSTABLE_* */
    uint64_t checked_unix_ns;    /* last re-check that agreed (0 = never) */
    uint64_t changed_unix_ns;    /* last re-check that disagreed (0 = never) */
    ng_ident ident;
    ng_bandwidth bandwidth;      /* valid with NG_EXT_BANDWIDTH */
    ng_latency latency[NG_MAX_LATENCY];
    ng_overlap overlap[NG_MAX_RANGES];
} ng_entry_ext;

/** Conflict schemes (ng_transport_ext.penalty's first index). */
#define NG_SCHEME_OUTGOING 0   /* k flows out of this node (1:k) */
#define NG_SCHEME_INCOMING 1   /* k flows into this node (k:1) */
#define NG_SCHEME_MIXED 2      /* k out and k in at once */

/** Fields of ng_transport_ext.status (nibble index). */
#define NG_TFIELD_PENALTY_OUTGOING 0
#define NG_TFIELD_PENALTY_INCOMING 1
#define NG_TFIELD_PENALTY_MIXED 2
#define NG_TFIELD_BETA 3
#define NG_TFIELD_GAMMA_O 4
#define NG_TFIELD_GAMMA_I 5
#define NG_TFIELD_BISECTION 6

/** ng_transport_ext.present bits. */
#define NG_TX_PENALTIES (1u << 0)
#define NG_TX_SHARING (1u << 1)
#define NG_TX_BISECTION (1u << 2)

/** The last effective bisection bandwidth: per-pair bandwidth under random
 *  perfect matchings of `nodes` nodes, all pairs streaming at once. */
typedef struct ng_bisection {
    double min_bytes_per_s;
    double median_bytes_per_s;
    double mean_bytes_per_s;
    double max_bytes_per_s;
    uint32_t nodes;
    uint32_t rounds;
    uint64_t msg_bytes;
    uint64_t measured_unix_ns;
} ng_bisection;

/**
 * What this node measured for one transport as a whole (ng_get_transport_ext):
 * penalty[scheme][k-1] = T_shared / T_ref of k concurrent flows, for
 * k = 1..n_k[scheme]; the beta, gamma_o, gamma_i fit of Vienne et al.'s
 * bandwidth-sharing model; the last effective bisection bandwidth.
 */
typedef struct ng_transport_ext {
    uint32_t present;            /* NG_TX_* */
    uint32_t n_k[3];
    uint64_t status;             /* 4-bit status per NG_TFIELD_* */
    uint64_t contention_unix_ns; /* when penalties and fit were measured */
    ng_estimate penalty[3][NG_MAX_K];
    ng_estimate beta;
    ng_estimate gamma_o;
    ng_estimate gamma_i;
    ng_bisection bisection;      /* valid with NG_TX_BISECTION */
} ng_transport_ext;

NG_STATIC_ASSERT(sizeof(ng_estimate) == 24, "ng_estimate ABI");
NG_STATIC_ASSERT(sizeof(ng_ident) == 72, "ng_ident ABI");
NG_STATIC_ASSERT(sizeof(ng_bandwidth) == 64, "ng_bandwidth ABI");
NG_STATIC_ASSERT(sizeof(ng_latency) == 64, "ng_latency ABI");
NG_STATIC_ASSERT(sizeof(ng_overlap) == 48, "ng_overlap ABI");
NG_STATIC_ASSERT(sizeof(ng_entry_ext) == 1064, "ng_entry_ext ABI");
NG_STATIC_ASSERT(offsetof(ng_entry_ext, ident) == 32, "ng_entry_ext ABI");
NG_STATIC_ASSERT(offsetof(ng_entry_ext, bandwidth) == 104, "ng_entry_ext ABI");
NG_STATIC_ASSERT(offsetof(ng_entry_ext, latency) == 168, "ng_entry_ext ABI");
NG_STATIC_ASSERT(offsetof(ng_entry_ext, overlap) == 680, "ng_entry_ext ABI");
NG_STATIC_ASSERT(sizeof(ng_bisection) == 56, "ng_bisection ABI");
NG_STATIC_ASSERT(sizeof(ng_transport_ext) == 736, "ng_transport_ext ABI");
NG_STATIC_ASSERT(offsetof(ng_transport_ext, penalty) == 32, "ng_transport_ext ABI");
NG_STATIC_ASSERT(offsetof(ng_transport_ext, bisection) == 680, "ng_transport_ext ABI");

/** The statuses that go with one lookup's ng_params: the entry-level word
 *  (NG_FIELD_*), the word of the range used (NG_RFIELD_*), its index. */
typedef struct ng_params_status {
    uint64_t entry;
    uint64_t range;
    uint32_t range_index;
    uint32_t reserved;
} ng_params_status;

NG_STATIC_ASSERT(sizeof(ng_params_status) == 24, "ng_params_status ABI");

/**
 * Like ng_lookup, but a peer without an entry of its own for `transport`
 * gets the parameters of its coverage class's entry for that transport,
 * flagged NG_FLAG_CLASS. A pair with its own entry is answered exactly as
 * ng_lookup answers. Same return codes. No system call.
 */
int ng_lookup_or_class(const ng_reader *r, const char *peer, const char *transport,
                       uint64_t msg_bytes, ng_params *out);

/**
 * Index of the pair's own entry, else of its class's entry for the
 * transport (whose flags carry NG_FLAG_CLASS): >= 0, or -ENOENT, -EAGAIN,
 * -EINVAL. For ng_lookup_index in hot loops.
 */
int ng_index_or_class(const ng_reader *r, const char *peer, const char *transport);

/**
 * ng_lookup_or_class plus the statuses of what it returned: whether EEL, L
 * and the range's g, G, o_s, o_r, O_s, O_r are identified
 * (NG_IDENT_STATUS(st->range, NG_RFIELD_G_PER_BYTE) == NG_STATUS_IDENTIFIED)
 * and the range's index. Same return codes; st all zero on a 1.0 segment.
 */
int ng_lookup_status(const ng_reader *r, const char *peer, const char *transport,
                     uint64_t msg_bytes, ng_params *out, ng_params_status *st);

/** ng_lookup_index plus the statuses. Same return codes. */
int ng_lookup_index_status(const ng_reader *r, int index, uint64_t msg_bytes, ng_params *out,
                           ng_params_status *st);

/**
 * The ABI 1.1 part of (peer, transport)'s entry: statuses, bandwidth,
 * latency percentiles, overlap, provenance times. Staleness as ng_lookup.
 * Returns 0, -ENOENT, -ESTALE, -EAGAIN or -EINVAL; on a 1.0 segment 0
 * with present == 0. No system call.
 */
int ng_get_entry_ext(const ng_reader *r, const char *peer, const char *transport,
                     ng_entry_ext *out);

/** ng_get_entry_ext by index. Same return codes. */
int ng_get_entry_ext_index(const ng_reader *r, int index, ng_entry_ext *out);

/**
 * The per-transport record of `transport` (contention penalties, sharing
 * fit, bisection). Returns 0, -ENOENT (none, as on every 1.0 segment),
 * -ESTALE (daemon gone), -EAGAIN or -EINVAL. No system call.
 */
int ng_get_transport_ext(const ng_reader *r, const char *transport, ng_transport_ext *out);

/**
 * Copies the name of the coverage class `peer` is mapped to ("@...",
 * NUL-terminated). Returns 0, -ENOENT (not mapped), -ERANGE (NG_PEER_MAX+1
 * always suffices), -EAGAIN or -EINVAL.
 */
int ng_peer_class(const ng_reader *r, const char *peer, char *cls, size_t cap);

/** Status (NG_STATUS_* / NG_REASON_*) of entry-level field NG_FIELD_*. */
unsigned ng_ident_status(const ng_ident *id, int field);

/** Status of field NG_RFIELD_* of protocol range `range`. */
unsigned ng_ident_range_status(const ng_ident *id, int range, int field);

/** A static name of a status code ("identified", "crosses_zero", ...). */
const char *ng_status_name(unsigned status);

#ifdef __cplusplus
}
#endif

#endif /* NETGAUGE_H */
