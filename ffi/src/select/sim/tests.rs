use super::*;

fn send(to: usize) -> Op {
    Op::Send {
        to,
        bytes: 8,
        exchange: false,
    }
}

#[test]
fn peers_in_flight_count_the_posted_and_those_up_to_the_next_wait_once_each() {
    let p = 6;
    let mut st = Rank {
        sent_to: PeerSet::new(p),
        received_from: PeerSet::new(p),
        ..Rank::default()
    };
    let mut ahead = PeerSet::new(p);
    // Sends to 1 and 2 posted and not waited for (a chain's after its
    // receives were waited for), then sends to 3 and 1, a wait, a send
    // to 4 and a receive from 5.
    for to in [1, 2, 2] {
        st.sends.push((to, 0));
        st.sent_to.insert(to);
    }
    st.ops = vec![
        send(3),
        send(1),
        Op::Wait,
        send(4),
        Op::Recv { from: 5, bytes: 8 },
    ];
    assert_eq!(in_flight_peers(&mut st, &mut ahead, true), 3, "1, 2, 3");
    assert_eq!(in_flight_peers(&mut st, &mut ahead, false), 1, "none: one");
    // Posting the send to 3 changes nothing: kept.
    st.sends.push((3, 0));
    st.sent_to.insert(3);
    st.pc = 1;
    assert_eq!(st.flows, [Some(3), Some(1)]);
    assert_eq!(in_flight_peers(&mut st, &mut ahead, true), 3);
    // Past the wait: counted again from what is ahead.
    st.sends.clear();
    st.sent_to.clear();
    st.flows = [None, None];
    st.pc = 3;
    assert_eq!(in_flight_peers(&mut st, &mut ahead, true), 1, "4");
    assert_eq!(in_flight_peers(&mut st, &mut ahead, false), 1, "5");
    assert_eq!(st.sent_to.len(), 0);
}

#[test]
fn a_peer_set_counts_each_rank_once() {
    let mut s = PeerSet::new(130);
    for r in [0, 64, 129, 64, 0] {
        s.insert(r);
    }
    assert_eq!(s.len(), 3);
    assert!(s.contains(129) && s.contains(64) && !s.contains(1));
    s.clear();
    assert_eq!(s.len(), 0);
    assert!(!s.contains(129));
}
