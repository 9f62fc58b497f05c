/* netgauge_select.h: model-based choice of MPI collective algorithms from
 * the parameters netgauged publishes (LogGP(S), LogfP). See ffi/src/select/
 * for the cost formulas. Link with -lnetgauge. */
#ifndef NETGAUGE_SELECT_H
#define NETGAUGE_SELECT_H

#include <stddef.h>
#include <stdint.h>
#include "netgauge.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Collectives. */
#define NG_COLL_BCAST 0u
#define NG_COLL_ALLREDUCE 1u
#define NG_COLL_BARRIER 2u
#define NG_COLL_REDUCE 3u
#define NG_COLL_ALLGATHER 4u /* msg_bytes: the block of one rank */
#define NG_COLL_ALLTOALL 5u  /* msg_bytes: the block one rank sends each rank */

/* Algorithms. */
#define NG_ALG_BCAST_BINOMIAL 0u
#define NG_ALG_BCAST_SCATTER_RD_ALLGATHER 1u
#define NG_ALG_BCAST_SCATTER_RING_ALLGATHER 2u
#define NG_ALG_BCAST_CHAIN 3u /* pipelined chain; segment_bytes is set */
#define NG_ALG_ALLREDUCE_RECURSIVE_DOUBLING 10u
#define NG_ALG_ALLREDUCE_RABENSEIFNER 11u
#define NG_ALG_ALLREDUCE_RING 12u
#define NG_ALG_ALLREDUCE_LINEAR 13u /* every vector sent directly */
#define NG_ALG_BARRIER_DISSEMINATION 20u
#define NG_ALG_BARRIER_TREE 21u
#define NG_ALG_REDUCE_BINOMIAL 30u
#define NG_ALG_REDUCE_RABENSEIFNER 31u /* reduce-scatter + binomial gather */
#define NG_ALG_ALLGATHER_RECURSIVE_DOUBLING 40u
#define NG_ALG_ALLGATHER_RING 41u
#define NG_ALG_ALLGATHER_LINEAR 42u /* every block sent directly */
#define NG_ALG_ALLTOALL_PAIRWISE 50u
#define NG_ALG_ALLTOALL_LINEAR 51u

/* The most candidates one collective has (ng_select's *n_all). */
#define NG_MAX_CANDIDATES 4u

/* Default cost of combining one byte in a reduction, ns. */
#define NG_DEFAULT_GAMMA_NS_PER_BYTE 0.03

typedef struct ng_choice {
    uint32_t algorithm;     /* NG_ALG_* */
    uint32_t reserved;
    double predicted_ns;    /* predicted completion time */
    uint64_t segment_bytes; /* segment of a pipelined algorithm, 0 if none */
} ng_choice;

/* Predict every candidate of `collective` for `ranks` processes and
 * `msg_bytes` bytes, from `n_ranges` parameter sets (one per protocol range,
 * or a single ng_lookup result), for one call every rank enters at once
 * (until the last rank returns). `best` gets the fastest; `all` (capacity
 * `all_cap`) every candidate, `*n_all` their number (up to NG_MAX_CANDIDATES). Pointers may
 * be NULL. A negative or NaN gamma selects the default. Returns 0, or
 * -EINVAL (bad collective, ranks == 0, no ranges or more than NG_MAX_RANGES).
 * No allocation, no system
 * call. (What a caller sees besides — each rank's own return, calls back to
 * back — and the comparison with the MPI library's own choice are priced
 * by the Rust API, netgauge::select::choose, which libngcoll uses.) */
int ng_select(const ng_params *ranges, size_t n_ranges, uint32_t collective,
              uint32_t ranks, uint64_t msg_bytes, double gamma_ns_per_byte,
              ng_choice *best, ng_choice *all, size_t all_cap, size_t *n_all);

/* Like ng_select, with the parameters of (peer, transport) looked up in the
 * mapped segment for every message size the algorithms use. If the segment
 * also holds the all-ranks exchange measured for `ranks` ranks (entry
 * "<transport>-x<ranks>", published by the MPI probe), the steps in which
 * every rank exchanges with a partner are priced with it. Returns 0 or
 * the negative errno of the failed lookup (-ENOENT, -ESTALE, -EAGAIN,
 * -EINVAL). */
int ng_select_lookup(const ng_reader *r, const char *peer, const char *transport,
                     uint32_t collective, uint32_t ranks, uint64_t msg_bytes,
                     double gamma_ns_per_byte, ng_choice *best, ng_choice *all,
                     size_t all_cap, size_t *n_all);

/* Static name of an NG_ALG_* value ("binomial", "pipelined_chain", ...), or
 * NULL. */
const char *ng_algorithm_name(uint32_t algorithm);

#ifdef __cplusplus
}
#endif
#endif
