//! Shows which broadcast tree Open MPI runs: rank 2 enters MPI_Bcast
//! `DELAY_MS` late. With basic linear the root sends to every rank itself, so
//! rank 3 finishes without waiting for rank 2; with a chain/pipeline
//! (0 → 1 → 2 → 3) rank 3 gets its data through rank 2 and waits the delay.
//! Rank 3 prints its MPI_Bcast time in ms. Run with 4 ranks.

use std::ffi::c_void;

use mpi::ffi;

const DELAY_MS: u64 = 400;

fn main() {
    let universe = mpi::initialize().expect("MPI init");
    let (rank, size) = netgauged::transport::mpi::world_rank_size();
    assert_eq!(size, 4, "run with -np 4");
    let mut buf = vec![rank as u8; 1 << 20];
    // SAFETY: MPI is initialized; collective on MPI_COMM_WORLD.
    unsafe { ffi::MPI_Barrier(ffi::RSMPI_COMM_WORLD) };
    if rank == 2 {
        std::thread::sleep(std::time::Duration::from_millis(DELAY_MS));
    }
    let t0 = mpi::time();
    // SAFETY: buf holds 1 MiB; every rank calls the broadcast from root 0.
    unsafe {
        ffi::MPI_Bcast(
            buf.as_mut_ptr() as *mut c_void,
            buf.len() as i32,
            ffi::RSMPI_UINT8_T,
            0,
            ffi::RSMPI_COMM_WORLD,
        )
    };
    let ms = (mpi::time() - t0) * 1e3;
    assert!(
        buf.iter().all(|&b| b == 0),
        "broadcast delivered wrong data"
    );
    if rank == 3 {
        println!("rank3_bcast_ms={ms:.3}");
    }
    drop(universe);
}
