//! The descriptors a server may use: the limit raised to the hard one at start
//! ([`raise_descriptor_limit`]) and the cap on open connections kept well below it
//! ([`connection_cap`]), so that clients never take the descriptors the server needs.

/// Most connections open at once, whatever the descriptor limit: a page's browser opens a
/// few; the rest are clients that wait, or hostile ones.
pub const MAX_CONNECTIONS: usize = 256;

/// Fewest connections open at once, even under a tiny descriptor limit.
pub const MIN_CONNECTIONS: usize = 32;

/// Descriptors kept for everything but connections (standard streams, the listening socket,
/// what the runtime opens).
pub const RESERVED_DESCRIPTORS: usize = 64;

/// Raises this process's soft limit on open descriptors (`RLIMIT_NOFILE`) to its hard limit;
/// the soft limit in force after (the old one when it cannot be raised, 1024 when it cannot
/// be read).
pub fn raise_descriptor_limit() -> usize {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit to a valid pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return 1024;
    }
    let mut soft = r.rlim_cur;
    if r.rlim_cur < r.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: r.rlim_max,
            rlim_max: r.rlim_max,
        };
        // SAFETY: setrlimit reads one rlimit from a valid pointer.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            soft = r.rlim_max;
        }
    }
    usize::try_from(soft).unwrap_or(usize::MAX)
}

/// The cap on open connections under a limit of `descriptors`: each connection costs one,
/// and at most half of those not reserved go to connections, between [`MIN_CONNECTIONS`] and
/// [`MAX_CONNECTIONS`].
pub fn connection_cap(descriptors: usize) -> usize {
    (descriptors.saturating_sub(RESERVED_DESCRIPTORS) / 2).clamp(MIN_CONNECTIONS, MAX_CONNECTIONS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_stays_well_below_the_limit() {
        assert_eq!(connection_cap(512), 224);
        assert_eq!(connection_cap(1024), 256);
        assert_eq!(connection_cap(1 << 20), 256);
        assert_eq!(connection_cap(usize::MAX), 256);
        assert_eq!(connection_cap(0), 32);
        assert_eq!(connection_cap(100), 32);
    }

    #[test]
    fn the_limit_is_raised_to_the_hard_one() {
        let now = raise_descriptor_limit();
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: as above.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) }, 0);
        assert_eq!(now, usize::try_from(r.rlim_cur).unwrap());
        assert_eq!(r.rlim_cur, r.rlim_max);
    }
}
