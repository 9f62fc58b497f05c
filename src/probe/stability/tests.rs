//! Tests of the stability verdict.

use super::*;

fn size(s: u64, prtt1: Vec<f64>) -> SizeSamples {
    SizeSamples {
        size_bytes: s,
        n: 8,
        prtt1_ns: prtt1,
        ..SizeSamples::default()
    }
}

fn steady(center: f64, k: usize) -> Vec<f64> {
    (0..k)
        .map(|i| center * (1.0 + 0.002 * (i % 5) as f64))
        .collect()
}

#[test]
fn a_driver_that_gives_its_cpu_away_shares_its_core() {
    let s = [size(1, steady(110e3, 40))];
    let cpu = CpuShare {
        round_trips: 200,
        switches: 190,
    };
    let v = verdict(&s, None, Some(&cpu));
    assert_eq!(v.cause, Instability::SharedCore);
    assert!(v.detail.contains("--cpu"), "{}", v.detail);
    // A tick or two over hundreds of round trips: sound.
    let quiet = CpuShare {
        round_trips: 200,
        switches: 2,
    };
    assert!(verdict(&s, None, Some(&quiet)).is_stable());
}

#[test]
fn two_modes_are_found_and_a_tail_is_not_a_mode() {
    let mut two = steady(4e3, 20);
    two.extend(steady(55e3, 20));
    assert!(two_modes(&two).is_some());
    assert_eq!(
        verdict(&[size(1, two)], None, None).cause,
        Instability::MultiModal
    );
    // A few slow rounds (under a quarter) are a tail.
    let mut tail = steady(4e3, 36);
    tail.extend([9e3, 20e3, 50e3, 90e3]);
    assert!(two_modes(&tail).is_none());
    // A smooth spread is one mode.
    let smooth: Vec<f64> = (0..40).map(|i| 4e3 + 50.0 * f64::from(i)).collect();
    assert!(two_modes(&smooth).is_none());
}

#[test]
fn the_smallest_size_measured_twice_must_agree() {
    let first = size(1, steady(8e3, 40));
    let again = size(1, steady(110e3, 40));
    let v = verdict(std::slice::from_ref(&first), Some(&again), None);
    assert_eq!(v.cause, Instability::RunsDisagree);
    // 10 % apart is within what a busy host does to a sweep.
    let near = size(1, steady(8.8e3, 40));
    assert!(verdict(std::slice::from_ref(&first), Some(&near), None).is_stable());
}
