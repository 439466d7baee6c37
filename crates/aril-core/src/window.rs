//! A turn's lexical window: the turn with its nearest neighbours of the same session, as one
//! text. A short reply ("Sure, I can give it to you tomorrow") says little alone; its window
//! holds the question it answers, so a BM25 search over windows finds it by the words around it.
//! The window is searched for its centre turn only: the neighbours lend their words, not their
//! place in the context.
//!
//! Rule: up to [`WINDOW_SPAN`] turns on each side, taken nearest first (before, then after) and
//! whole, while the window stays within [`WINDOW_TOKENS`] o200k tokens; the centre is always in.
//! Long turns (an assistant's answer) therefore have windows of themselves alone, and short
//! exchanges get their context. Measured on LoCoMo (docs/benchmarks-history.md): session windows of
//! ±2 turns lift evidence recall at 1k tokens by about 3 points; windows cut at segment
//! boundaries did worse than none, and windows of preceding turns only gave half the gain.

use crate::{Turn, tokens};

/// Neighbours taken on each side of the centre at most.
pub const WINDOW_SPAN: usize = 2;
/// o200k tokens a window holds at most (the centre turn alone may exceed it).
pub const WINDOW_TOKENS: usize = 256;

/// The window text of `session[center]`, where `session` holds consecutive turns of one session
/// in store order: rendered lines joined by newlines, in session order.
pub fn window_text(session: &[&Turn], center: usize) -> String {
    let cost = |i: usize| tokens::count(&session[i].rendered());
    let (mut lo, mut hi) = (center, center + 1);
    let mut used = cost(center);
    loop {
        let mut grew = false;
        if center - lo < WINDOW_SPAN && lo > 0 && used + cost(lo - 1) <= WINDOW_TOKENS {
            lo -= 1;
            used += cost(lo);
            grew = true;
        }
        if hi - center - 1 < WINDOW_SPAN && hi < session.len() && used + cost(hi) <= WINDOW_TOKENS {
            used += cost(hi);
            hi += 1;
            grew = true;
        }
        if !grew {
            break;
        }
    }
    session[lo..hi]
        .iter()
        .map(|t| t.rendered())
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{NewTurn, Role, Scope, TurnId};

    fn turn(i: i64, text: &str) -> Turn {
        Turn {
            id: TurnId(format!("t{i}")),
            seq: i,
            turn: NewTurn {
                scope: Scope::user("u").unwrap(),
                conversation: "c".into(),
                session: Some("s".into()),
                role: Role::User,
                speaker: Some(if i % 2 == 0 { "Ana" } else { "Rui" }.into()),
                text: text.into(),
                event_time: None,
                source_id: None,
                metadata: None,
                lifecycle: Default::default(),
            },
            ingest_time: chrono::Utc::now(),
        }
    }

    #[test]
    fn a_short_turn_takes_two_neighbours_each_side_in_order() {
        let turns: Vec<Turn> = (0..7).map(|i| turn(i, &format!("line {i}"))).collect();
        let refs: Vec<&Turn> = turns.iter().collect();
        assert_eq!(
            window_text(&refs, 3),
            "Rui: line 1\nAna: line 2\nRui: line 3\nAna: line 4\nRui: line 5"
        );
        assert_eq!(
            window_text(&refs, 0),
            "Ana: line 0\nRui: line 1\nAna: line 2"
        );
        assert_eq!(
            window_text(&refs, 6),
            "Ana: line 4\nRui: line 5\nAna: line 6"
        );
    }

    #[test]
    fn neighbours_that_would_overflow_the_budget_stay_out() {
        let long = "word ".repeat(300);
        let turns = [
            turn(0, "before"),
            turn(1, &long),
            turn(2, "centre"),
            turn(3, "after"),
        ];
        let refs: Vec<&Turn> = turns.iter().collect();
        // The long neighbour does not fit; the one beyond it is not reached past it.
        assert_eq!(window_text(&refs, 2), "Ana: centre\nRui: after");
        // A centre over the budget stands alone.
        assert_eq!(window_text(&refs, 1), format!("Rui: {long}"));
    }
}
