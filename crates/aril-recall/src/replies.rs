//! Questions about the assistant's own replies ("Can you remind me of the restaurant you
//! recommended?", "… our previous conversation about the Library of Babel …"). Session search's
//! session list measures how much *the user* spoke of a question (it reads the dense turns, the
//! user's by default); the answer to such a question is in what the assistant said, often in a
//! session whose user turns say nothing of it ("Complete the sentence and the essay"). So a
//! question that carries a cue of the assistant's replies gets no session list: its sessions
//! rank by their best fused unit, which the BM25 windows (every turn's words) reach.
//!
//! What it deliberately does not do: embed assistant turns (several times the user's cost), or
//! read a question without a cue as one about the assistant.

/// Words and phrases that point at what the assistant said, matched on whole words of the
/// lower-cased question.
const CUES: &[&str] = &[
    "you told",
    "you mentioned",
    "you recommended",
    "you suggested",
    "you said",
    "you provided",
    "you gave",
    "you wrote",
    "you listed",
    "you shared",
    "you explained",
    "you described",
    "you showed",
    "you proposed",
    "you came up with",
    "did you say",
    "did you tell",
    "did you mention",
    "did you recommend",
    "did you suggest",
    "did you give",
    "did you write",
    "our previous conversation",
    "our previous chat",
    "our previous discussion",
    "our last conversation",
    "our last chat",
    "our earlier conversation",
    "our conversation",
    "our chat",
    "our discussion",
    "we discussed",
    "we talked about",
];

/// Whether `question` asks about what the assistant said (one of [`CUES`]).
pub fn asks_about_replies(question: &str) -> bool {
    crate::cues::holds_any(&crate::cues::words(question), CUES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_about_the_assistants_words_are_told_from_the_users() {
        for q in [
            "Can you remind me of the name of the deli you recommended near the Vatican?",
            "I was going through our previous conversation about The Library of Babel: what did Borges say?",
            "I think we discussed work from home jobs for seniors earlier. What was the 7th?",
            "I remember you told me to dilute tea tree oil. What ratio?",
            "What did you suggest for my knee?",
        ] {
            assert!(asks_about_replies(q), "{q}");
        }
        for q in [
            "What did I tell you about my sister?",
            "Can you recommend a restaurant in Lisbon?",
            "How many books did I read for our book club?",
            "Do you remember my dog's name?",
            "Where did you go?",
        ] {
            assert!(!asks_about_replies(q), "{q}");
        }
    }
}
