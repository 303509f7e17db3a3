//! One libFuzzer binary for every target: `LSR_FUZZ_TARGET` names the target (one link of the
//! whole workspace instead of one per target).

#![no_main]

use std::sync::OnceLock;

#[global_allocator]
static ALLOCATOR: lsr_fuzz::CappedAllocator = lsr_fuzz::CappedAllocator;

static TARGET: OnceLock<lsr_fuzz::Target> = OnceLock::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let target = TARGET.get_or_init(|| {
        let name = std::env::var("LSR_FUZZ_TARGET").unwrap_or_default();
        lsr_fuzz::target(&name).unwrap_or_else(|| {
            panic!(
                "LSR_FUZZ_TARGET=`{name}` is not a target; expected one of {}",
                lsr_fuzz::TARGETS
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
    });
    target(data);
});
