// SPDX-License-Identifier: BSD-2-Clause
//! Linux kernels known to lose rseq adds: the one table the crate consults, and the reading
//! of `uname`'s release it is matched against.
//!
//! By default a process on a kernel of this table takes the fallback (`sched_getcpu()` and a
//! locked add, exact) instead of rseq; `PCPU_COUNTER_RSEQ=force` or
//! [`Choice::ForceRseq`](super::Choice::ForceRseq) trusts the kernel all the same (one whose
//! vendor backported the fix).
//!
//! **aarch64, Linux 6.19 up to 7.0.14.** The 6.19 rseq rework ("rseq: Optimize exit to user
//! space", with arm64's partial move to the generic entry code) stopped aborting a critical
//! section whose thread is preempted and resumed on the same CPU: another thread's add to
//! that CPU's block, made meanwhile, is overwritten by the resumed non-locked commit.
//! Reported as "\[REGRESSION\] rseq: refactoring in v6.19 broke everyone on arm64 and tcmalloc
//! everywhere" (lkml, 2026-04-22); fixed by "rseq: Revert to historical performance killing
//! behaviour" and "arm64/entry: Fix arm64-specific rseq brokenness", in 7.0.10 (x86-64) and
//! 7.0.14 (aarch64) per the yugabyte-db#33458 thread. Debian's arm64 6.19.11 loses adds of
//! `tests/rseq.rs` in every run, and a plain C critical section too
//! (`testbeds/linux-vm/rseq_add.c`).
//!
//! **x86_64 6.19 up to 7.0.10 is not listed**, on purpose. Its regression is that the kernel
//! no longer rewrites `cpu_id_start` after every context switch (tcmalloc relied on that to
//! invalidate a cache); this crate never reads `cpu_id_start`, and x86-64's critical sections
//! are still aborted on preemption. Measured on Debian's amd64 `6.19.11+deb13-cloud-amd64`
//! under `qemu-system-x86_64 -M q35 -cpu max -smp 4`: `cpu_id_start` rewritten after 0 of 200
//! context switches (200 of 200 on 6.12), yet 15 boots ran every test of `tests/rseq.rs`
//! exactly and a C control with the crate's x86-64 section lost 0 adds in 72 runs (an
//! unprotected twin lost thousands). So x86-64 stays on rseq there unless a run shows
//! otherwise.
//!
//! A release that cannot be read (no `major.minor` at its start) is not known broken: the
//! crate takes rseq there, as before this table existed.

use core::fmt;

/// A kernel release's `major.minor.patch` (the patch 0 when absent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Release(pub(crate) u32, pub(crate) u32, pub(crate) u32);

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// A range of releases that loses rseq adds on one arch.
pub(crate) struct Broken {
    /// `std::env::consts::ARCH` of the process.
    pub(crate) arch: &'static str,
    /// The first broken release.
    pub(crate) from: Release,
    /// The first fixed release (not broken).
    pub(crate) fixed: Release,
    /// What goes wrong, after "Linux <release>".
    pub(crate) what: &'static str,
}

/// The kernels known to lose rseq adds (see the module docs for the sources).
pub(crate) const KNOWN_BROKEN: &[Broken] = &[Broken {
    arch: "aarch64",
    from: Release(6, 19, 0),
    fixed: Release(7, 0, 14),
    what: "aborts no rseq section on arm64",
}];

/// Reads the `major.minor[.patch]` at the start of a `uname -r` release: `6.19.11+deb13-cloud-arm64`
/// is 6.19.11, `6.19.0-1-arm64` 6.19.0, `7.0.13-rc1` 7.0.13, `6.19-rc3` and `6.19` 6.19.0.
/// `None` without a `major.minor` of digits there (`""`, `6`, `x.19`, `6.x`).
pub(crate) fn parse_release(release: &str) -> Option<Release> {
    /// The leading digits of `s` as a number, and what follows them.
    fn number(s: &str) -> Option<(u32, &str)> {
        let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        Some((s[..end].parse().ok()?, &s[end..]))
    }
    let (major, rest) = number(release)?;
    let (minor, rest) = number(rest.strip_prefix('.')?)?;
    let patch = match rest.strip_prefix('.').map(number) {
        Some(Some((patch, _))) => patch,
        _ => 0,
    };
    Some(Release(major, minor, patch))
}

/// The entry of [`KNOWN_BROKEN`] for a process of `arch` on the kernel `release`, with the
/// release read; `None` where none applies or the release cannot be read.
pub(crate) fn verdict(arch: &str, release: &str) -> Option<(Release, &'static Broken)> {
    let r = parse_release(release)?;
    KNOWN_BROKEN
        .iter()
        .find(|b| b.arch == arch && b.from <= r && r < b.fixed)
        .map(|b| (r, b))
}

/// Why the rseq path is not taken on such a kernel: what [`Path::Fallback`]'s reason says.
///
/// [`Path::Fallback`]: super::Path::Fallback
pub(crate) fn reason(r: Release, b: &Broken) -> std::string::String {
    std::format!(
        "Linux {r} {} (fixed in {}; PCPU_COUNTER_RSEQ=force overrides)",
        b.what,
        b.fixed
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_are_read() {
        for (s, want) in [
            ("6.19.11+deb13-cloud-arm64", Some(Release(6, 19, 11))),
            ("7.0.14", Some(Release(7, 0, 14))),
            ("7.0.13-rc1", Some(Release(7, 0, 13))),
            ("6.19.0-1-arm64", Some(Release(6, 19, 0))),
            ("6.18.44-fc-v1300", Some(Release(6, 18, 44))),
            ("6.19-rc3", Some(Release(6, 19, 0))),
            ("6.19", Some(Release(6, 19, 0))),
            ("6.19.", Some(Release(6, 19, 0))),
            ("10.2.3", Some(Release(10, 2, 3))),
            ("", None),
            ("6", None),
            ("6.", None),
            ("x.19.1", None),
            ("6.x.1", None),
            ("-6.19.1", None),
            ("99999999999.1.1", None),
        ] {
            assert_eq!(parse_release(s), want, "{s:?}");
        }
    }

    /// The gate, by arch and release: every boundary of the table, both arches. Fails if an
    /// entry is dropped or widened, or the arch ignored.
    #[test]
    fn known_broken_by_arch_and_release() {
        for (arch, release, broken) in [
            ("aarch64", "6.18.0", false),
            ("aarch64", "6.18.99", false),
            ("aarch64", "6.19.0", true),
            ("aarch64", "6.19-rc1", true),
            ("aarch64", "6.19.0-1-arm64", true),
            ("aarch64", "6.19.11+deb13-cloud-arm64", true),
            ("aarch64", "7.0.0", true),
            ("aarch64", "7.0.13", true),
            ("aarch64", "7.0.13-rc1", true),
            ("aarch64", "7.0.14", false),
            ("aarch64", "7.1.0", false),
            ("aarch64", "7.3.4+deb13-cloud-arm64", false),
            ("aarch64", "6.12.118+deb12-cloud-arm64", false),
            ("aarch64", "garbage", false),
            ("aarch64", "", false),
            ("x86_64", "6.18.0", false),
            ("x86_64", "6.19.0", false),
            ("x86_64", "6.19.11+deb13-cloud-amd64", false),
            ("x86_64", "7.0.13", false),
            ("x86_64", "7.0.14", false),
        ] {
            assert_eq!(verdict(arch, release).is_some(), broken, "{arch} {release}");
        }
    }

    #[test]
    fn the_reason_names_release_and_fix() {
        let (r, b) = verdict("aarch64", "6.19.11+deb13-cloud-arm64").unwrap();
        assert_eq!(
            reason(r, b),
            "Linux 6.19.11 aborts no rseq section on arm64 (fixed in 7.0.14; \
             PCPU_COUNTER_RSEQ=force overrides)"
        );
    }
}
