//! A driver's code, as a kernel crate writes it: it takes a `&Zone` and keeps `Counter`s.
//! On a hosted target it must build and document with any features (kernel code builds on
//! the host, and its docs.rs build works); at run time, without `sim`, every zone
//! constructor refuses with `Error::NoCpuRegister`, so no add can run on a thread that has
//! no per-CPU register; with `sim` the same constructors make zones (.ci/package.sh runs it
//! both ways).

use pcpu_counter::{Counter, Error, Zone, ZoneLayout, ZoneMemory};

/// A network driver's statistics: two counters of one zone.
pub struct NetStats<'z> {
    packets: Counter<'z>,
    bytes: Counter<'z>,
}

impl<'z> NetStats<'z> {
    /// Allocates the driver's counters.
    pub fn new(zone: &'z Zone<'z>) -> Result<Self, Error> {
        Ok(NetStats {
            packets: zone.alloc()?,
            bytes: zone.alloc()?,
        })
    }

    /// Counts one received packet of `len` bytes.
    pub fn on_receive(&self, len: u64) {
        self.packets.inc();
        self.bytes.add(len as i64);
    }
}

static MEMORY: ZoneMemory<2, 1> = ZoneMemory::new();

fn main() {
    let mut blocks = vec![0u64; 2 * 16];
    let mut meta = [0u64; 17];
    let layout = ZoneLayout::dense(blocks.as_mut_ptr() as usize, 128, 2);
    let made = vec![
        ("Zone::new", Zone::new(&MEMORY).map(drop)),
        (
            "Zone::from_raw_parts",
            // SAFETY: the blocks and the metadata are this function's, used by nothing else.
            unsafe { Zone::from_raw_parts(layout, &mut meta) }.map(drop),
        ),
    ];
    #[cfg(feature = "alloc")]
    let made = {
        let mut made = made;
        made.push(("Zone::with_capacity", Zone::with_capacity(2, 16).map(drop)));
        made
    };
    for (what, result) in made {
        if cfg!(feature = "sim") {
            assert_eq!(result, Ok(()), "{what} under sim");
        } else {
            assert_eq!(result, Err(Error::NoCpuRegister), "{what} without sim");
        }
        println!("{what}: {result:?}");
    }
    if !cfg!(feature = "sim") {
        println!("no zone without a per-CPU register: {}", Error::NoCpuRegister);
    }
    let _ = NetStats::new;
    let _ = NetStats::on_receive;
}
