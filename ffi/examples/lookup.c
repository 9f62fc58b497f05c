/*
 * lookup.c — print the netgauged parameters for one (peer, transport, size).
 *
 *   cc lookup.c $(pkg-config --cflags --libs netgauge) -o lookup
 *   ./lookup [SEGMENT|-] [PEER] [TRANSPORT] [BYTES]
 *
 * SEGMENT "-" (or absent) means the default ($NETGAUGE_SEGMENT or
 * /run/netgauged/segment). A peer without an entry of its own is answered from
 * its coverage class (ABI 1.1), and the statuses say whether the values
 * used are identified.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <netgauge.h>

int main(int argc, char **argv)
{
    const char *path = (argc > 1 && strcmp(argv[1], "-") != 0) ? argv[1] : NULL;
    const char *peer = argc > 2 ? argv[2] : "localhost";
    const char *transport = argc > 3 ? argv[3] : NG_TRANSPORT_UDP;
    uint64_t bytes = argc > 4 ? strtoull(argv[4], NULL, 10) : 8;

    ng_reader *r = ng_open(path);
    if (r == NULL) {
        fprintf(stderr, "ng_open(%s): %s\n", path ? path : NG_DEFAULT_PATH, strerror(errno));
        return 2;
    }

    ng_params p;
    ng_params_status st;
    int rc = ng_lookup_status(r, peer, transport, bytes, &p, &st);
    if (rc != 0) {
        fprintf(stderr, "ng_lookup_status(%s, %s, %" PRIu64 "): %s\n", peer, transport, bytes,
                ng_strerror(rc));
        ng_close(r);
        return 1;
    }
    printf("%s/%s %" PRIu64 " B: range [%" PRIu64 ", %" PRIu64 "] EEL=%.1f ns L=%.1f ns "
           "o_s=%.1f ns o_r=%.1f ns g=%.1f ns G=%.4f ns/B flags=0x%x predicted=%.1f ns\n",
           peer, transport, bytes, p.range_from_bytes, p.range_to_bytes, p.eel_ns, p.L_ns,
           p.o_s_ns, p.o_r_ns, p.g_ns, p.G_ns_per_byte, p.flags,
           ng_params_predict_ns(&p, bytes));
    printf("range %u: g %s, G %s, EEL %s%s\n", st.range_index,
           ng_status_name(NG_IDENT_STATUS(st.range, NG_RFIELD_G)),
           ng_status_name(NG_IDENT_STATUS(st.range, NG_RFIELD_G_PER_BYTE)),
           ng_status_name(NG_IDENT_STATUS(st.entry, NG_FIELD_EEL)),
           (p.flags & NG_FLAG_CLASS) ? " (values of the peer's coverage class)" : "");

    /* The large-message bandwidth, when the daemon measured it. */
    ng_entry_ext x;
    int idx = ng_index_or_class(r, peer, transport);
    if (idx >= 0 && ng_get_entry_ext_index(r, idx, &x) == 0 && (x.present & NG_EXT_BANDWIDTH))
        printf("sustained bandwidth %.3f Gb/s (G %s)\n",
               8.0 / x.bandwidth.sustained_G_ns_per_byte.value,
               ng_status_name(NG_IDENT_STATUS(x.ident.entry, NG_FIELD_G_SUSTAINED)));

    /* The hot-loop way: resolve the index once, then look up by index. */
    if (idx >= 0 && ng_lookup_index(r, idx, bytes, &p) == 0)
        printf("index %d: predicted %.1f ns\n", idx, ng_predict_index_ns(r, idx, bytes));

    ng_close(r);
    return 0;
}
