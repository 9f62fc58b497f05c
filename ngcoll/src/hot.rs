//! What an interposed call looks up on its thread, in one thread-local:
//! the layouts of the predefined datatypes it has seen, and the state of
//! the communicator it called a collective on last.
//!
//! The thread-local holds an Arc, so it has a destructor, which the C
//! library runs at thread or process exit before `atexit` handlers and
//! static destructors; a program may call collectives from those (a final
//! reduction, then MPI_Finalize). Every access therefore uses `try_with`:
//! after the destructor a call goes without the caches.

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use crate::mpi::{Mpi, MpiError, Raw, TypeInfo};
use crate::runtime::CommState;

/// An empty slot of the datatype cache.
const NO_TYPE: TypeInfo = TypeInfo {
    size: 0,
    extent: 0,
    data_end: 0,
    contiguous: false,
    predefined: false,
    class: crate::mpi::TypeClass::Other,
};

/// Datatypes a thread's cache holds (a program uses a few).
const TYPE_SLOTS: usize = 8;

/// What an interposed call looks up on its thread, in one thread-local.
struct Hot {
    /// Predefined datatypes seen lately: their handles never change, so
    /// their layout is asked of MPI once (4 PMPI calls saved per call).
    /// Every slot is compared (handles are addresses or encodings whose
    /// low bits repeat between types: a slot chosen from them would let two
    /// types of one program evict each other on every call), and a new
    /// type takes the slots in turn. Handles (0: empty) in one cache
    /// line, layouts beside them.
    type_handles: [Cell<Raw>; TYPE_SLOTS],
    type_infos: [Cell<TypeInfo>; TYPE_SLOTS],
    type_next: Cell<usize>,
    /// The communicator this thread called a collective on last, and its
    /// state: a program calls most collectives on one communicator, and
    /// this saves the attribute lookup. Holding the Arc keeps the state
    /// alive; its `freed` flag says whether the handle still names it (a
    /// freed communicator's handle may be reused by a new one).
    last: RefCell<Option<(Raw, Arc<CommState>)>>,
}

thread_local! {
    static HOT: Hot = const {
        Hot {
            type_handles: [const { Cell::new(0) }; TYPE_SLOTS],
            type_infos: [const { Cell::new(NO_TYPE) }; TYPE_SLOTS],
            type_next: Cell::new(0),
            last: RefCell::new(None),
        }
    };
}

/// A datatype's layout, from the cache for predefined ones.
#[inline]
pub fn type_info<M: Mpi + ?Sized>(m: &M, datatype: Raw) -> Result<TypeInfo, MpiError> {
    if datatype != 0 {
        let hit = HOT
            .try_with(|h| {
                h.type_handles
                    .iter()
                    .position(|c| c.get() == datatype)
                    .map(|i| h.type_infos[i].get())
            })
            .ok()
            .flatten();
        if let Some(ti) = hit {
            return Ok(ti);
        }
    }
    let ti = m.type_info(datatype)?;
    if ti.predefined && datatype != 0 {
        let _ = HOT.try_with(|h| {
            let i = h.type_next.get() % TYPE_SLOTS;
            h.type_handles[i].set(datatype);
            h.type_infos[i].set(ti);
            h.type_next.set(i + 1);
        });
    }
    Ok(ti)
}

/// The state of `comm` if it is the communicator this thread called a
/// collective on last and has not been freed since. The pointer stays
/// valid while the cache holds its Arc: until this thread's next
/// collective on another communicator.
#[inline]
pub(crate) fn last_state(comm: Raw) -> Option<*const CommState> {
    HOT.try_with(|h| {
        h.last
            .borrow()
            .as_ref()
            .and_then(|(c, st)| (*c == comm && !st.is_freed()).then_some(Arc::as_ptr(st)))
    })
    .ok()
    .flatten()
}

/// Calls `f` with the state this thread called a collective on last.
pub(crate) fn with_last(f: impl FnOnce(&Arc<CommState>)) {
    let _ = HOT.try_with(|h| {
        if let Some((_, st)) = h.last.borrow().as_ref() {
            f(st)
        }
    });
}

/// Makes `st`, the state of `comm`, this thread's last (after the
/// thread-local's destructor, `st` is dropped: the communicator's
/// attribute still holds the state).
pub(crate) fn set_last(comm: Raw, st: Arc<CommState>) {
    let _ = HOT.try_with(|h| *h.last.borrow_mut() = Some((comm, st)));
}

#[cfg(test)]
mod tests;
