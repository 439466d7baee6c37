//! Where a unit's words live in the BM25 index: every word is indexed under a namespace naming
//! the unit's user, kind and role (`"3:sam\u{1f}window\u{1f}user\u{1f}lake"`). A word's postings
//! are then one user's units of one kind and role, so a search inside a user's memory is a plain
//! union of term queries, which tantivy answers with block-max WAND (skipping every block of
//! postings that cannot reach the top k) instead of scoring every unit of every user holding a
//! query word and filtering afterwards.

use aril_core::{Role, UnitKind};

/// Ends a namespace inside a term. The word tokenizer splits on every character that is not
/// alphanumeric, so no word holds it.
const END: char = '\u{1f}';

/// One user's units of one kind and role, as a term prefix.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Namespace(String);

impl Namespace {
    /// The namespace of a unit. The user id is length-prefixed, so no id can end inside
    /// another's namespace.
    pub(crate) fn of(user: &str, kind: UnitKind, role: Option<Role>) -> Self {
        Namespace(format!(
            "{}:{user}{END}{}{END}{}{END}",
            user.len(),
            kind.as_str(),
            role.map_or("", Role::as_str)
        ))
    }

    /// Every namespace a unit of `user` and one of `kinds` may be in: without a role and with
    /// each of `roles`, or with any role when `roles` is `None`. With `roles`, a unit without a
    /// role is not in any.
    pub(crate) fn all(user: &str, kinds: &[UnitKind], roles: Option<&[Role]>) -> Vec<Self> {
        let roles: Vec<Option<Role>> = match roles {
            None => std::iter::once(None)
                .chain(Role::ALL.into_iter().map(Some))
                .collect(),
            Some(roles) => roles.iter().copied().map(Some).collect(),
        };
        kinds
            .iter()
            .flat_map(|&kind| {
                roles
                    .iter()
                    .map(move |&role| Namespace::of(user, kind, role))
            })
            .collect()
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// The term text of `word` in this namespace.
    pub(crate) fn word(&self, word: &str) -> String {
        format!("{}{word}", self.0)
    }
}

/// The word of a namespaced term text (the whole text when it has no namespace).
pub(crate) fn word_of(term: &str) -> &str {
    term.rsplit(END).next().unwrap_or(term)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespaced_word_gives_its_word_back_and_users_cannot_collide() {
        let ns = Namespace::of("sam", UnitKind::Window, Some(Role::User));
        assert_eq!(word_of(&ns.word("lake")), "lake");
        // A user id that spells another's namespace stays apart from it.
        let tricky = Namespace::of("sam\u{1f}window", UnitKind::Turn, None);
        assert!(!tricky.as_str().starts_with(ns.as_str()));
        assert_ne!(
            Namespace::of("a", UnitKind::Turn, None),
            Namespace::of("a", UnitKind::Segment, None)
        );
    }

    #[test]
    fn a_role_restriction_leaves_out_the_units_without_a_role() {
        let every = Namespace::all("u", &[UnitKind::Turn], None);
        assert_eq!(every.len(), 1 + Role::ALL.len());
        let users = Namespace::all(
            "u",
            &[UnitKind::Turn, UnitKind::Segment],
            Some(&[Role::User]),
        );
        assert_eq!(
            users,
            vec![
                Namespace::of("u", UnitKind::Turn, Some(Role::User)),
                Namespace::of("u", UnitKind::Segment, Some(Role::User)),
            ]
        );
    }
}
