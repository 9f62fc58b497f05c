// Scratch explorer (not committed): PRTT(n,0,s) round times for several n.
use netgauged::clock::{Clock, ClockChoice, HostClock};
use netgauged::link::{self, Kind, LinkSpec, NoRendezvous, Peer};
use netgauged::pattern::prtt::prtt;
use std::time::Duration;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let kind: Kind = a[1].parse().unwrap();
    let s: usize = a[3].parse().unwrap();
    let ns: Vec<u32> = a[4].split(',').map(|x| x.parse().unwrap()).collect();
    let reps: usize = a[5].parse().unwrap();
    let clock = HostClock::choose(ClockChoice::Auto).unwrap();
    let mut spec = LinkSpec::new(kind);
    if kind == Kind::Raw {
        spec.device = Some("eth0".into());
        spec.peer = Peer::Mac(netgauged::transport::raw_eth::parse_mac(&a[2]).unwrap());
    } else {
        spec.peer = Peer::Addr(a[2].parse().unwrap());
    }
    spec.options.clock = clock;
    let mut t = link::open_driver(&spec, &mut NoRendezvous).unwrap();
    let to = Duration::from_secs(5);
    for _ in 0..20 {
        let _ = prtt(&mut t, &clock, 0, 1, 0, 1, to);
    }
    for _ in 0..3 {
        let _ = prtt(&mut t, &clock, 0, 4, 0, s, to);
    }
    let mut out: Vec<Vec<f64>> = vec![Vec::new(); ns.len()];
    for _ in 0..reps {
        for (i, &n) in ns.iter().enumerate() {
            match prtt(&mut t, &clock, 0, n, 0, s, to) {
                Ok(r) => out[i].push(r.rtt_ns),
                Err(e) => eprintln!("n={n}: {e}"),
            }
        }
    }
    for (i, &n) in ns.iter().enumerate() {
        let v: Vec<String> = out[i].iter().map(|x| format!("{:.0}", x)).collect();
        println!("{n} {}", v.join(" "));
    }
    let _ = clock.now();
}
