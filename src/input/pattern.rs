//! Glob patterns over `/`-separated names: `*` and `?` within one component, `**` across
//! components (`job/**/rank*.pickle` matches `job/rank0.pickle` and `job/a/b/rank0.pickle`).
//!
//! Matched in time proportional to pattern × name (one row of a table per name byte), never
//! by backtracking: a listing of a million keys against `*a*a*a*b` stays linear in the keys.

/// Whether `text` has a wildcard (`*` or `?`).
pub fn is_pattern(text: &str) -> bool {
    text.contains(['*', '?'])
}

/// The part of `pattern` before its first wildcard, cut back to the last `/` (the prefix every
/// matching name starts with, as a whole directory: `job/r*/x` gives `job/`).
pub fn literal_prefix(pattern: &str) -> &str {
    let first = pattern.find(['*', '?']).unwrap_or(pattern.len());
    match pattern[..first].rfind('/') {
        Some(i) => &pattern[..=i],
        None => "",
    }
}

/// One token of a pattern.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Token {
    /// A byte to match as is.
    Byte(u8),
    /// `?`: any one byte but `/`.
    One,
    /// `*`: any run of bytes without `/`.
    Run,
    /// `**/` (a whole component and its `/`): any run of whole components, each with its `/`.
    Deep,
    /// `**` as the last component: anything, `/` included.
    All,
}

fn tokens(pattern: &[u8]) -> Vec<Token> {
    let mut out = Vec::with_capacity(pattern.len());
    let mut i = 0;
    while i < pattern.len() {
        let at_start = i == 0 || pattern[i - 1] == b'/';
        if pattern[i..].starts_with(b"**") && at_start {
            let end = i + 2;
            if end == pattern.len() {
                out.push(Token::All);
                i = end;
                continue;
            }
            if pattern[end] == b'/' {
                out.push(Token::Deep);
                i = end + 1;
                continue;
            }
        }
        out.push(match pattern[i] {
            b'*' => Token::Run,
            b'?' => Token::One,
            b => Token::Byte(b),
        });
        i += 1;
    }
    out
}

/// Whether `name` matches `pattern` ([module docs](self)).
pub fn matches(pattern: &str, name: &str) -> bool {
    let toks = tokens(pattern.as_bytes());
    let name = name.as_bytes();
    // reach[j]: the first j tokens can match the name so far.
    let mut reach = vec![false; toks.len() + 1];
    reach[0] = true;
    close(&toks, &mut reach, true);
    for &c in name {
        let mut next = vec![false; toks.len() + 1];
        for (j, t) in toks.iter().enumerate() {
            if !reach[j] {
                continue;
            }
            match *t {
                Token::Byte(b) if b == c => next[j + 1] = true,
                Token::One if c != b'/' => next[j + 1] = true,
                Token::Run if c != b'/' => next[j] = true,
                // It only ends where a component starts ([`close`]).
                Token::Deep | Token::All => next[j] = true,
                _ => {}
            }
        }
        let after_slash = c == b'/';
        reach = next;
        close(&toks, &mut reach, after_slash);
        if !reach.iter().any(|&r| r) {
            return false;
        }
    }
    reach[toks.len()]
}

/// Tokens that match nothing are skipped: `*` and a last `**` always; `**/` only where a component starts
/// (`at_component_start`), since it stands for whole components and its `/`.
fn close(toks: &[Token], reach: &mut [bool], at_component_start: bool) {
    for j in 0..toks.len() {
        if reach[j] {
            match toks[j] {
                Token::Run | Token::All => reach[j + 1] = true,
                Token::Deep if at_component_start => reach[j + 1] = true,
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_component_wildcards() {
        assert!(matches("rank*.pickle", "rank12.pickle"));
        assert!(matches("r?nk0.*", "rank0.pkl"));
        assert!(!matches("rank*.pickle", "rank1.pkl"));
        assert!(matches("*", ""));
        assert!(!matches("*", "a/b"));
        assert!(!matches("job/*.pickle", "job/a/x.pickle"));
        assert!(matches("job/*/x.pickle", "job/a/x.pickle"));
        assert!(!matches("?", ""));
        assert!(!matches("a?b", "a/b"));
    }

    #[test]
    fn deep_wildcards_cross_components() {
        let p = "job/**/rank*.pickle";
        assert!(matches(p, "job/rank0.pickle"));
        assert!(matches(p, "job/it_1/rank0.pickle"));
        assert!(matches(p, "job/it_1/exit/rank12.pickle"));
        assert!(!matches(p, "job/it_1/rank0.pkl"));
        assert!(!matches(p, "jobs/rank0.pickle"));
        assert!(!matches(p, "job/it_1/xrank0.pickle/y"));
        assert!(matches("**", "a/b/c"));
        assert!(matches("**/x", "x"));
        assert!(matches("**/x", "a/b/x"));
        assert!(!matches("**/x", "a/bx"));
        assert!(matches("a/**", "a/b/c"));
        // `**` inside a component is two `*`s.
        assert!(matches("a**b", "axxb"));
        assert!(!matches("a**b", "ax/xb"));
    }

    #[test]
    fn no_backtracking_blowup() {
        let name = "a".repeat(10_000);
        assert!(!matches("*a*a*a*a*a*a*a*a*b", &name));
    }

    #[test]
    fn prefixes_end_at_a_directory() {
        assert_eq!(literal_prefix("job/r*/x"), "job/");
        assert_eq!(literal_prefix("job/it_1/rank*.pickle"), "job/it_1/");
        assert_eq!(literal_prefix("rank*.pickle"), "");
        assert_eq!(literal_prefix("a/b/c.pickle"), "a/b/");
    }

    /// Against a reference matcher by recursion (exponential, fine at these sizes).
    #[test]
    fn agrees_with_a_recursive_reference() {
        fn reference(p: &[u8], n: &[u8]) -> bool {
            if p.starts_with(b"**/") {
                // zero components, or one component and its slash, then again
                if reference(&p[3..], n) {
                    return true;
                }
                return match n.iter().position(|&c| c == b'/') {
                    Some(i) => reference(p, &n[i + 1..]),
                    None => false,
                };
            }
            if p == b"**" {
                return true;
            }
            match (p.first(), n.first()) {
                (None, None) => true,
                (Some(b'*'), _) => {
                    reference(&p[1..], n)
                        || (!n.is_empty() && n[0] != b'/' && reference(p, &n[1..]))
                }
                (Some(b'?'), Some(&c)) if c != b'/' => reference(&p[1..], &n[1..]),
                (Some(a), Some(b)) if a == b => reference(&p[1..], &n[1..]),
                _ => false,
            }
        }
        let pats = [
            "**/r*",
            "a/**/b",
            "*/b",
            "a*/**",
            "?/**/?",
            "**",
            "a/b",
            "*",
            "**/",
            "a/**/**/b",
        ];
        let alphabet = [b'a', b'b', b'/', b'r'];
        let mut names = vec![String::new()];
        for _ in 0..5 {
            let mut more = Vec::new();
            for n in &names {
                for &c in &alphabet {
                    more.push(format!("{n}{}", c as char));
                }
            }
            names.extend(more);
            names.sort();
            names.dedup();
        }
        for p in pats {
            // The reference reads `**` only as a whole component, as `tokens` does.
            let whole = p.split('/').all(|c| c == "**" || !c.contains("**"));
            if !whole {
                continue;
            }
            for n in &names {
                let r = if p.starts_with("**") || p.contains("/**") {
                    reference_components(p, n, &reference)
                } else {
                    reference(p.as_bytes(), n.as_bytes())
                };
                assert_eq!(matches(p, n), r, "pattern {p:?} name {n:?}");
            }
        }
    }

    /// The reference applied where `**` stands in the middle (`a/**/b`): it handles a leading
    /// `**/` only, so the literal head is peeled first.
    fn reference_components(p: &str, n: &str, reference: &dyn Fn(&[u8], &[u8]) -> bool) -> bool {
        match p.find("**") {
            Some(0) => reference(p.as_bytes(), n.as_bytes()),
            Some(i) => {
                let head = &p[..i];
                // the head is literal-with-wildcards up to and with its '/': match it against
                // each prefix of n that ends in '/'
                (0..=n.len()).any(|k| {
                    n.is_char_boundary(k)
                        && (k == 0 || n.as_bytes()[k - 1] == b'/')
                        && reference(head.as_bytes(), &n.as_bytes()[..k])
                        && reference(&p.as_bytes()[i..], &n.as_bytes()[k..])
                })
            }
            None => reference(p.as_bytes(), n.as_bytes()),
        }
    }
}
