//! The release binary (issue 54): small (no debug info; `Cargo.toml`'s `[profile.release]`),
//! and still naming its functions in a backtrace (the symbol table stays). Read from the file
//! cargo built for these tests, so it holds whatever the profile makes.

use crate::common::{ci, unavailable_under};

/// The size the release binary stays under (issue 54: under 25 MB).
const MAX_BYTES: u64 = 25 * 1000 * 1000;

#[test]
fn the_release_binary_is_small_and_names_its_functions() {
    if cfg!(debug_assertions) {
        // `cargo test` without --release builds the dev profile: nothing here to judge.
        let _: Option<()> = unavailable_under(
            ci(),
            "the release profile (cargo test --release)",
            "the binary under test was built by the dev profile",
        );
        return;
    }
    let path = env!("CARGO_BIN_EXE_memlens");
    let bytes = std::fs::read(path).unwrap();
    let size = bytes.len() as u64;
    assert!(
        size < MAX_BYTES,
        "{path}: {size} bytes, over the {MAX_BYTES} the release binary stays under"
    );
    if cfg!(target_os = "linux") {
        // ELF: no .debug_* section is left, the symbol table is (what a backtrace reads).
        let sections = elf_section_names(&bytes).expect("the binary is a 64-bit ELF file");
        let debug: Vec<&String> = sections
            .iter()
            .filter(|n| n.starts_with(".debug_"))
            .collect();
        assert!(
            debug.is_empty(),
            "{path} still carries debug info: {debug:?}"
        );
        assert!(
            sections.iter().any(|n| n == ".symtab"),
            "{path}: no symbol table: {sections:?}"
        );
        // The symbol table names the crate's functions (legacy mangling `_ZN7memlens...`,
        // or v0 `...7memlens...` after `_R`): what a backtrace prints.
        assert!(
            contains(&bytes, b"_ZN7memlens6pickle") || contains(&bytes, b"7memlens6pickle"),
            "{path}: no symbol names memlens::pickle's functions (a backtrace would show addresses)"
        );
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// The section names of a little-endian 64-bit ELF file, read from its section headers and
/// their string table; `None` when `b` is not one.
fn elf_section_names(b: &[u8]) -> Option<Vec<String>> {
    let u16_at = |o: usize| Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?) as usize);
    let u32_at = |o: usize| Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?) as usize);
    let u64_at = |o: usize| Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?) as usize);
    if b.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let (shoff, shentsize, shnum, shstrndx) =
        (u64_at(0x28)?, u16_at(0x3a)?, u16_at(0x3c)?, u16_at(0x3e)?);
    let header = |i: usize| shoff + i * shentsize;
    let strtab = u64_at(header(shstrndx) + 0x18)?;
    (0..shnum)
        .map(|i| {
            let start = strtab + u32_at(header(i))?;
            let len = b.get(start..)?.iter().position(|&c| c == 0)?;
            Some(String::from_utf8_lossy(&b[start..start + len]).into_owned())
        })
        .collect()
}
