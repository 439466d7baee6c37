//! Stable, content-derived identifiers: the same input always gets the same id, so re-importing a
//! file finds what is already stored instead of adding it twice.

/// Hex digest (blake3) of the parts, each length-prefixed so `("ab","c")` and `("a","bc")` differ.
pub fn content_hash(parts: &[&str]) -> String {
    let mut hasher = blake3::Hasher::new();
    for part in parts {
        hasher.update(&(part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hasher.finalize().to_hex().to_string()
}

/// The first 20 hex digits of [`content_hash`]: 80 bits, short enough to read, long enough never to
/// collide within one store.
pub fn short_hash(parts: &[&str]) -> String {
    content_hash(parts)[..20].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_length_prefixed() {
        assert_ne!(content_hash(&["ab", "c"]), content_hash(&["a", "bc"]));
        assert_eq!(content_hash(&["ab", "c"]), content_hash(&["ab", "c"]));
        assert_eq!(short_hash(&["x"]).len(), 20);
    }
}
