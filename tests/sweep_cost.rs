//! A sweep's planned cost against the daemon's default budget: a new
//! peer's first entry for every transport of a 1 Gbit/s Ethernet node (udp
//! and raw) appears within 60 s.

use netgauged::daemon::config::Config;
use netgauged::probe::ProbeOptions;
use netgauged::sweep::cost::{plan, LinkEstimate};
use netgauged::transport::Kind;

#[test]
fn first_entries_of_a_new_peer_within_a_minute_on_a_gigabit_link() {
    let cfg: Config = toml::from_str("key_file = \"/k\"\n").expect("config");
    let budget = cfg.budget_bytes_per_s as f64;
    let link = LinkEstimate::default();
    // The daemon's scheduler: a job starts when the bucket (empty at
    // start) is not in debt; its bytes are charged when it ends.
    let (mut now_s, mut tokens) = (0.0f64, 0.0f64);
    for kind in [Kind::Udp, Kind::Raw] {
        let mut opts = ProbeOptions::for_kind(kind);
        opts.sweep.max_size_bytes = cfg.max_size_bytes;
        opts.sweep.latency_samples = cfg.latency_samples;
        let c = plan(&opts.sweep, &link);
        if tokens < 0.0 {
            now_s += -tokens / budget;
            tokens = 0.0;
        }
        now_s += c.seconds;
        tokens += c.seconds * budget - c.bytes as f64;
        println!(
            "{}: {:.0} MB planned, {:.1} s; entry at {now_s:.1} s",
            kind.name(),
            c.bytes as f64 / 1e6,
            c.seconds
        );
        assert!(now_s <= 60.0, "{} publishes at {now_s:.1} s", kind.name());
    }
}
