//! The disambiguation state carried from one segment's encoding to the next: who is who (aliases
//! to canonical names) and what is still unresolved. Bounded: it is cut to a token budget, newest
//! entries kept, so it never grows with history.

use aril_core::tokens;
use serde::{Deserialize, Serialize};

/// Aliases and open references, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EncoderState {
    /// `(alias, canonical name)`, e.g. `("my sister", "Ana")`.
    pub aliases: Vec<(String, String)>,
    /// Mentions not yet resolved ("the trip", "that book").
    pub open_references: Vec<String>,
}

impl EncoderState {
    /// The state as the prompt shows it.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (alias, name) in &self.aliases {
            out.push_str(&format!("- \"{alias}\" means {name}\n"));
        }
        for r in &self.open_references {
            out.push_str(&format!("- unresolved: {r}\n"));
        }
        if out.is_empty() {
            out.push_str("(nothing yet)\n");
        }
        out
    }

    /// Merges a newer state in (its aliases win) and cuts the result to `budget` o200k tokens,
    /// dropping the oldest entries first.
    pub fn merged(&self, newer: &EncoderState, budget: usize) -> EncoderState {
        let mut aliases: Vec<(String, String)> = self
            .aliases
            .iter()
            .filter(|(a, _)| !newer.aliases.iter().any(|(b, _)| b.eq_ignore_ascii_case(a)))
            .cloned()
            .collect();
        aliases.extend(newer.aliases.iter().cloned());
        let mut state = EncoderState {
            aliases,
            open_references: newer.open_references.clone(),
        };
        while tokens::count(&state.render()) > budget {
            if !state.open_references.is_empty() {
                state.open_references.remove(0);
            } else if !state.aliases.is_empty() {
                state.aliases.remove(0);
            } else {
                break;
            }
        }
        state
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alias(a: &str, n: &str) -> (String, String) {
        (a.into(), n.into())
    }

    #[test]
    fn newer_aliases_win_and_the_budget_drops_the_oldest() {
        let old = EncoderState {
            aliases: vec![alias("my sister", "Ana"), alias("the boss", "Rui")],
            open_references: vec!["the trip".into()],
        };
        let newer = EncoderState {
            aliases: vec![alias("My Sister", "Bia")],
            open_references: vec![],
        };
        let merged = old.merged(&newer, 1000);
        assert_eq!(
            merged.aliases,
            vec![alias("the boss", "Rui"), alias("My Sister", "Bia")]
        );
        assert!(merged.open_references.is_empty());
        let many = EncoderState {
            aliases: (0..200)
                .map(|i| alias(&format!("alias {i}"), &format!("Name {i}")))
                .collect(),
            open_references: vec![],
        };
        let cut = EncoderState::default().merged(&many, 100);
        assert!(tokens::count(&cut.render()) <= 100);
        assert_eq!(
            cut.aliases.last(),
            many.aliases.last(),
            "the newest is kept"
        );
    }
}
