use super::*;

const SAMPLE: &str = include_str!("../../../systemd/netgauged.toml");

#[test]
fn the_sample_config_parses_and_validates() {
    let c: Config = toml::from_str(SAMPLE).expect("sample parses");
    c.validate().expect("sample is valid");
    assert_eq!(c.peers.len(), 2);
    assert_eq!(c.clock, crate::clock::ClockChoice::Auto);
    assert_eq!(
        c.peers[0].transports.as_deref(),
        Some(&["raw".to_string(), "udp".to_string()][..])
    );
}

#[test]
fn metrics_outputs_are_off_by_default_and_checked() {
    let base = "key_file = \"/k\"\n[[peer]]\nname = \"a\"\naddress = \"10.0.0.1:7470\"\n";
    let with = |extra: &str| {
        let c: Config = toml::from_str(&format!("{extra}\n{base}")).unwrap();
        c.validate().map(|()| c)
    };
    let c = with("").unwrap();
    assert_eq!((c.metrics_listen, c.metrics_textfile), (None, None));
    let c = with("metrics_listen = \"10.0.0.9:9470\"\nmetrics_textfile = \"/v/ng.prom\"").unwrap();
    assert_eq!(c.metrics_listen, Some("10.0.0.9:9470".parse().unwrap()));
    let e = with("metrics_listen = \"10.0.0.9:0\"")
        .unwrap_err()
        .to_string();
    assert!(e.contains("metrics_listen needs a port"), "{e}");
    for bad in ["/v/ng.txt", "/v/.prom", "/v/ng"] {
        let e = with(&format!("metrics_textfile = \"{bad}\""))
            .unwrap_err()
            .to_string();
        assert!(e.contains("must end in .prom"), "{bad}: {e}");
    }
}

#[test]
fn mistakes_are_named() {
    let base = "key_file = \"/k\"\n";
    let e = toml::from_str::<Config>(&format!("{base}bogus = 1\n")).unwrap_err();
    assert!(e.to_string().contains("bogus"), "{e}");
    let c: Config = toml::from_str(&format!(
        "{base}[[peer]]\nname = \"a\"\naddress = \"10.0.0.1:7470\"\ntransports = [\"tcp\"]\n"
    ))
    .unwrap();
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("unknown transport \"tcp\""), "{e}");
    let c: Config = toml::from_str(&format!(
        "{base}[[peer]]\nname = \"a\"\naddress = \"10.0.0.1:7470\"\n[[peer]]\nname = \"a\"\naddress = \"10.0.0.2:7470\"\n"
    ))
    .unwrap();
    assert!(c.validate().unwrap_err().to_string().contains("twice"));
    let c: Config = toml::from_str(&format!("{base}budget_bytes_per_s = 0\n")).unwrap();
    assert!(c.validate().is_err());
    let e = toml::from_str::<Config>(&format!("{base}[verbs]\ndevice = \"rxe0\"\ngid = 1\n"))
        .unwrap_err();
    assert!(e.to_string().contains("gid"), "{e}");
    let c: Config =
        toml::from_str(&format!("{base}[verbs]\ndevice = \"rxe0\"\nport = 0\n")).unwrap();
    assert!(c.validate().is_err());
    let e = toml::from_str::<Config>(&format!("{base}clock = \"hpet\"\n")).unwrap_err();
    assert!(e.to_string().contains("hpet"), "{e}");
    let c: Config = toml::from_str(&format!("{base}clock = \"monotonic-raw\"\n")).unwrap();
    assert_eq!(c.clock, crate::clock::ClockChoice::MonotonicRaw);
}

#[test]
fn contention_section() {
    let base = "key_file = \"/k\"\n[[peer]]\nname = \"b\"\naddress = \"10.0.0.2:7470\"\n";
    let c: Config = toml::from_str(base).unwrap();
    assert_eq!(c.contention, ContentionConfig::default());
    let c: Config =
        toml::from_str(&format!("{base}[contention]\ninterval_s = 0\nrounds = 4\n")).unwrap();
    c.validate().unwrap();
    assert_eq!(
        (
            c.contention.interval_s,
            c.contention.rounds,
            c.contention.burst
        ),
        (0.0, 4, 16)
    );
    for bad in [
        "interval_s = -1",
        "burst = 1",
        "max_k = 9",
        "rounds = 0",
        "size_bytes = 0",
    ] {
        let c: Config = toml::from_str(&format!("{base}[contention]\n{bad}\n")).unwrap();
        assert!(c.validate().is_err(), "{bad}");
    }
    assert!(toml::from_str::<Config>(&format!("{base}[contention]\nk = 2\n")).is_err());
}

#[test]
fn verbs_section() {
    let c: Config = toml::from_str(
        "key_file = \"/k\"\n[verbs]\ndevice = \"rxe0\"\ngid_index = 1\n[[peer]]\nname = \"b\"\naddress = \"10.0.0.2:7470\"\ntransports = [\"rdma\", \"msg\"]\n",
    )
    .unwrap();
    c.validate().unwrap();
    let v = c.verbs.unwrap();
    assert_eq!(
        (v.device.as_str(), v.port, v.gid_index, v.eager_max_bytes),
        ("rxe0", 1, Some(1), 16384)
    );
}
