// SPDX-License-Identifier: BSD-2-Clause
//! The add's fast path: two packed words, one load each.
//!
//! Every add needs the process's rseq values (the area's offset from the thread pointer, which
//! index field, how many blocks the index may pick) and the counter's (its slot in block 0,
//! the block stride). They are packed into one word each so that an add costs two loads
//! before the critical section, whatever the number of counters in turn: the compiler cannot
//! keep them in registers across the section's `asm!` (it may write memory), so every field
//! is reloaded at every add, and fields were the add's cost.
//!
//! - The process word ([`publish`]): bits 0..32 the index field's offset from the thread
//!   pointer (`__rseq_offset` plus 4 for `cpu_id` or 24 for `mm_cid`, as an `i32`), bit 32
//!   set for `mm_cid` (the add runs the copy of the section made for that field), bits
//!   33..64 the blocks every fast zone has (the possible CPUs). It is 0 until the first
//!   zone, and stays 0 on the paths that need a check per add: counters made then take the
//!   slow path.
//! - The counter word ([`counter_word`]): bits 0..56 the slot's address in block 0 (Linux
//!   user addresses lie below 2^56 on x86_64 and aarch64), bits 56..64 the stride's shift;
//!   0 there sends the counter's adds to the slow path (a zone with fewer blocks than the
//!   process word says).

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::registration::{Config, Index, Path, CPU_ID_OFFSET, MM_CID_OFFSET};

#[cfg(target_arch = "x86_64")]
#[path = "../../arch/x86_64/rseq.rs"]
pub(super) mod imp;
#[cfg(target_arch = "aarch64")]
#[path = "../../arch/aarch64/rseq.rs"]
pub(super) mod imp;

/// The process word (see the module docs); 0 until published.
static PROCESS: AtomicU64 = AtomicU64::new(0);

/// The bits of a counter word that hold the address.
const ADDR_MASK: usize = (1 << 56) - 1;

/// Addresses a counter word can hold: below 2^56.
pub(super) const ADDR_LIMIT: usize = 1 << 56;

/// The process word's bit for the `mm_cid` index.
const CID: u64 = 1 << 32;

/// Makes the process word from the process's configuration, once a zone exists (idempotent):
/// the fast path for glibc's registration, and for a registration of this crate's own with the
/// `cpu_id` index, whose -1/-2 on an unregistered thread fails the fast path's range check.
/// An own registration with `mm_cid` (which reads 0 unregistered) and the fallback stay on
/// the slow path, as does an offset or a CPU count the word cannot hold.
pub(super) fn publish(cfg: &Config) {
    let fast = match cfg.path {
        Path::Rseq {
            glibc_registered: true,
            ..
        }
        | Path::Rseq {
            index: Index::Cpu, ..
        } => true,
        Path::Rseq { .. } | Path::Fallback { .. } | Path::Unusable { .. } => false,
    };
    let at = cfg.rseq_offset.checked_add(cfg.index_offset as isize);
    let Some(Ok(at)) = at.map(i32::try_from) else {
        return;
    };
    if fast && cfg.nslots < 1 << 31 {
        let cid = if cfg.index_offset == MM_CID_OFFSET {
            CID
        } else {
            0
        };
        // (Three fields of disjoint bits.)
        let word = u64::from(at as u32) + cid + ((cfg.nslots as u64) << 33);
        PROCESS.store(word, Relaxed);
    }
}

/// The word of a counter whose slot in block 0 is at `slot0` (below [`ADDR_LIMIT`]) in a
/// zone of stride `1 << shift` that has the blocks the process word says: with the shift
/// when the process word is published and fast, else with 0 (every add takes the slow path).
pub(super) fn counter_word(slot0: usize, shift: u32) -> usize {
    debug_assert!(slot0 < ADDR_LIMIT && shift < 64);
    if PROCESS.load(Relaxed) == 0 {
        return slot0;
    }
    slot0 + ((shift as usize) << 56)
}

/// The blocks the process word lets an index pick inline (0 before it is published).
pub(super) fn block_count() -> usize {
    (PROCESS.load(Relaxed) >> 33) as usize
}

/// Whether a counter with this word adds on the fast path.
pub(super) fn is_inline(word: usize) -> bool {
    word >= ADDR_LIMIT
}

/// The address of the slot in block 0 that `word` holds.
pub(super) fn slot0(word: usize) -> usize {
    word & ADDR_MASK
}

/// One add on the fast path: `false`, with nothing added, when the counter takes the slow
/// path or the thread's index is not below the process word's block count.
///
/// # Safety
/// `word` is below [`ADDR_LIMIT`] (then nothing is added), or a live counter's word
/// ([`counter_word`]); a shift other than 0 in it says that
/// the process word was published, as a fast one, before the counter was made (which
/// happens before this add: the counter reached this thread), and that the counter's zone
/// has the blocks the process word says, which only rseq adds write.
#[inline(always)]
pub(super) unsafe fn try_add(word: usize, v: i64) -> bool {
    if !is_inline(word) {
        return false;
    }
    // Published before the counter was made, and never changed after: the load sees it.
    let process = PROCESS.load(Relaxed);
    let (at, nslots) = (process as u32 as i32 as isize, (process >> 33) as usize);
    let (shift, slot0) = ((word >> 56) as u32, word & ADDR_MASK);
    // SAFETY: the process word describes the process's configuration: on its paths every
    // thread's area is registered (glibc's) or reads a negative `cpu_id`, which the range
    // check refuses; `at` is the index field's offset, of the field the bit names; the slots
    // per the caller.
    unsafe {
        if process & CID != 0 {
            imp::try_add::<false, MM_CID_OFFSET>(at, nslots, shift, slot0, v)
        } else {
            imp::try_add::<false, CPU_ID_OFFSET>(at, nslots, shift, slot0, v)
        }
    }
}
