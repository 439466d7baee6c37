//! The encoder's messages: what a card is, then the state, the recent cards and the segment's
//! turns under their labels, each turn with the absolute time it was said.

use aril_core::{Turn, tokens};
use aril_llm::Message;

use crate::encode::RecentCard;
use crate::{EncoderState, Guidance};

const INSTRUCTIONS: &str = "You turn one segment of a conversation into memory cards for a \
long-term memory. Each card is one self-contained statement that a reader understands without the \
conversation: resolve pronouns and nicknames to names (use the known aliases), and turn relative \
dates (\"yesterday\", \"last year\", \"next month\") into absolute ones from the time each turn was \
said. Card types: fact (a stable fact about someone or something), preference (likes, dislikes, \
wishes), event (something that happened or will happen, with its date in time), constraint (a rule \
or limit to respect), procedure (how something is done), failure_pattern (what went wrong and why), \
tool_capability (what a tool can or cannot do). List in source_turns the labels of the turns each \
card comes from. When a card updates or contradicts one of the recent cards, put that card's label \
in supersedes. Write no card for greetings or small talk. Also return the state: aliases learned \
(alias and canonical name) and references still unresolved. Reply with JSON only.";

/// The recent cards that fit in `budget` tokens, newest kept, in their original order.
pub(crate) fn recent_within(recent: &[RecentCard], budget: usize) -> &[RecentCard] {
    let mut used = 0;
    let mut keep = 0;
    for card in recent.iter().rev() {
        used += tokens::count(&card.text) + 6;
        if used > budget {
            break;
        }
        keep += 1;
    }
    &recent[recent.len() - keep..]
}

pub(crate) fn messages(
    conversation: &str,
    turns: &[Turn],
    state: &EncoderState,
    recent: &[RecentCard],
    guidance: &Guidance,
) -> Vec<Message> {
    let mut user = String::from("Known aliases and open references:\n");
    user.push_str(&state.render());
    user.push_str("\nRecent cards:\n");
    if recent.is_empty() {
        user.push_str("(none)\n");
    }
    for (i, c) in recent.iter().enumerate() {
        let kind = serde_json::to_value(c.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        user.push_str(&format!("C{} [{kind}] {}\n", i + 1, c.text));
    }
    user.push('\n');
    user.push_str(&labelled_turns(conversation, turns));
    vec![
        Message::system(format!("{INSTRUCTIONS}{}", guidance.render())),
        Message::user(user),
    ]
}

/// The segment's turns under their labels, each with the time it was said.
fn labelled_turns(conversation: &str, turns: &[Turn]) -> String {
    let mut out = format!("Segment of conversation {conversation}:\n");
    for (i, t) in turns.iter().enumerate() {
        let when = t
            .turn
            .event_time
            .map(|at| at.format("%Y-%m-%d %H:%M").to_string())
            .unwrap_or_else(|| "time unknown".into());
        out.push_str(&format!("T{} [{when}] {}\n", i + 1, t.rendered()));
    }
    out
}

const SUMMARY_INSTRUCTIONS: &str = "You summarize one segment of a conversation for a long-term \
memory, in a few sentences that a reader understands without the conversation: name the people, \
and give absolute dates for relative ones from the time each turn was said. Reply with JSON only.";

/// The summary ablation's messages: the turns alone, no state and no recent cards.
pub(crate) fn summary_messages(
    conversation: &str,
    turns: &[Turn],
    guidance: &Guidance,
) -> Vec<Message> {
    vec![
        Message::system(format!("{SUMMARY_INSTRUCTIONS}{}", guidance.render())),
        Message::user(labelled_turns(conversation, turns)),
    ]
}
