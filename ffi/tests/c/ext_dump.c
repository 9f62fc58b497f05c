/*
 * ABI 1.1 from C: prints everything ng_get_entry_ext, ng_lookup_status,
 * ng_lookup_or_class, ng_peer_class and ng_get_transport_ext return, one
 * field per token, for tests/c_example.rs to compare with what it wrote.
 *
 *   ext_dump SEGMENT PEER TRANSPORT MAPPED_PEER
 *
 * Exit 0 on success, 1 when a call fails (its code on stderr), 3 on usage.
 */
#include <inttypes.h>
#include <stdio.h>

#include <netgauge.h>

static void est(const char *name, const ng_estimate *e)
{
    printf(" %s=%.3f [%.3f, %.3f]", name, e->value, e->lo, e->hi);
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "%s: %s\n", what, ng_strerror(rc));
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 5)
        return 3;
    const char *peer = argv[2], *transport = argv[3], *mapped = argv[4];
    ng_reader *r = ng_open(argv[1]);
    if (!r)
        return 1;

    ng_entry_ext x;
    int rc = ng_get_entry_ext(r, peer, transport, &x);
    if (rc != 0)
        return fail("ng_get_entry_ext", rc);
    printf("ext present=%u n_latency=%u n_overlap=%u instability=%u checked=%" PRIu64
           " changed=%" PRIu64 "\n",
           x.present, x.n_latency, x.n_overlap, x.instability, x.checked_unix_ns,
           x.changed_unix_ns);
    printf("ident entry=%016" PRIx64, x.ident.entry);
    for (int i = 0; i < NG_MAX_RANGES; i++)
        printf(" %016" PRIx64, x.ident.range[i]);
    printf("\n");
    printf("status EEL=%s S=%s G_sustained=%s g0=%s g1=%s overlap_recv1=%s\n",
           ng_status_name(ng_ident_status(&x.ident, NG_FIELD_EEL)),
           ng_status_name(ng_ident_status(&x.ident, NG_FIELD_S)),
           ng_status_name(NG_IDENT_STATUS(x.ident.entry, NG_FIELD_G_SUSTAINED)),
           ng_status_name(ng_ident_range_status(&x.ident, 0, NG_RFIELD_G)),
           ng_status_name(ng_ident_range_status(&x.ident, 1, NG_RFIELD_G)),
           ng_status_name(NG_IDENT_STATUS(x.ident.range[1], NG_RFIELD_OVERLAP_RECV)));
    if (x.present & NG_EXT_BANDWIDTH) {
        printf("bandwidth");
        est("sustained", &x.bandwidth.sustained_G_ns_per_byte);
        est("burst", &x.bandwidth.burst_G_ns_per_byte);
        printf(" burst_bytes=%" PRIu64 " regime=%u range=%u\n", x.bandwidth.burst_bytes,
               x.bandwidth.regime, x.bandwidth.range_index);
    }
    for (uint32_t i = 0; i < x.n_latency; i++) {
        const ng_latency *l = &x.latency[i];
        printf("latency size=%" PRIu64 " samples=%" PRIu64
               " min=%.3f p50=%.3f p90=%.3f p99=%.3f p999=%.3f max=%.3f\n",
               l->size_bytes, l->samples, l->min_ns, l->p50_ns, l->p90_ns, l->p99_ns,
               l->p999_ns, l->max_ns);
    }
    for (uint32_t i = 0; i < x.n_overlap; i++) {
        printf("overlap %u", i);
        est("send", &x.overlap[i].send);
        est("recv", &x.overlap[i].recv);
        printf("\n");
    }

    ng_params p;
    ng_params_status st;
    rc = ng_lookup_status(r, peer, transport, 10000, &p, &st);
    if (rc != 0)
        return fail("ng_lookup_status", rc);
    printf("lookup range=%u from=%" PRIu64 " g=%s G=%s flags=0x%x\n", st.range_index,
           p.range_from_bytes, ng_status_name(NG_IDENT_STATUS(st.range, NG_RFIELD_G)),
           ng_status_name(NG_IDENT_STATUS(st.range, NG_RFIELD_G_PER_BYTE)), p.flags);

    char cls[NG_PEER_MAX + 1];
    rc = ng_peer_class(r, mapped, cls, sizeof cls);
    if (rc != 0)
        return fail("ng_peer_class", rc);
    rc = ng_lookup_or_class(r, mapped, transport, 100, &p);
    if (rc != 0)
        return fail("ng_lookup_or_class", rc);
    printf("class peer=%s class=%s class_flag=%d eel=%.3f\n", mapped, cls,
           (p.flags & NG_FLAG_CLASS) != 0, p.eel_ns);

    ng_transport_ext t;
    rc = ng_get_transport_ext(r, transport, &t);
    if (rc != 0)
        return fail("ng_get_transport_ext", rc);
    printf("transport present=%u n_k=%u,%u,%u status=%016" PRIx64 " at=%" PRIu64 "\n",
           t.present, t.n_k[0], t.n_k[1], t.n_k[2], t.status, t.contention_unix_ns);
    for (int s = 0; s < 3; s++)
        for (uint32_t k = 0; k < t.n_k[s]; k++) {
            printf("penalty scheme=%d k=%u", s, k + 1);
            est("p", &t.penalty[s][k]);
            printf("\n");
        }
    if (t.present & NG_TX_SHARING) {
        printf("sharing");
        est("beta", &t.beta);
        est("gamma_o", &t.gamma_o);
        est("gamma_i", &t.gamma_i);
        printf(" gamma_i_status=%s\n",
               ng_status_name(NG_IDENT_STATUS(t.status, NG_TFIELD_GAMMA_I)));
    }
    if (t.present & NG_TX_BISECTION) {
        const ng_bisection *b = &t.bisection;
        printf("bisection min=%.3f median=%.3f mean=%.3f max=%.3f nodes=%u rounds=%u msg=%" PRIu64
               " at=%" PRIu64 "\n",
               b->min_bytes_per_s, b->median_bytes_per_s, b->mean_bytes_per_s,
               b->max_bytes_per_s, b->nodes, b->rounds, b->msg_bytes, b->measured_unix_ns);
    }
    ng_close(r);
    return 0;
}
