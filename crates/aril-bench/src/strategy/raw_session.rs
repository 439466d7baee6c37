//! seed 004's session-document baselines (MemPalace's method and its all-turns variant): one
//! document per session, embedded as ChromaDB does (all-MiniLM-L6-v2 truncated to 256 word pieces),
//! ranked by cosine. They reproduce the truncation pitfall on purpose.
//!
//! - `raw-session-all`: every turn rendered `Role: content` (role capitalised), joined by newlines.
//! - `raw-session-user`: the user turns' contents joined by newlines; sessions without user text
//!   are left out.
//!
//! A retrieved session is handed to the reader as a [`Unit`] that covers only the turns whose text
//! it holds (LoCoMo evidence recall and the token budgets count what the reader would get): the
//! document itself for both raw baselines, so `raw-session-user` covers the user turns only.

use aril_core::{Role, render_line};

use super::{Embeddings, Strategy, Unit, rank_by_cosine};
use crate::BenchError;
use crate::data::{Case, HSession};

/// `Role: content` lines of every turn (LoCoMo: `Speaker: text`).
pub(crate) fn render_all(session: &HSession) -> String {
    session
        .turns
        .iter()
        .map(|t| render_line(t.role, t.speaker.as_deref(), &t.text))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The user turns' contents, one per line.
pub(crate) fn render_user(session: &HSession) -> String {
    session
        .turns
        .iter()
        .filter(|t| t.role == Role::User)
        .map(|t| t.text.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The session as one unit covering every turn, with `text` (its transcript, `render_all`).
pub(crate) fn whole_session_unit(session: &HSession, text: String) -> Unit {
    Unit {
        session: session.id.clone(),
        turns: session.turns.iter().map(|t| t.id.clone()).collect(),
        text,
    }
}

/// The session's user turns as one unit with `text` (`render_user`), covering those turns only.
fn user_turns_unit(session: &HSession, text: String) -> Unit {
    Unit {
        session: session.id.clone(),
        turns: session
            .turns
            .iter()
            .filter(|t| t.role == Role::User)
            .map(|t| t.id.clone())
            .collect(),
        text,
    }
}

/// A strategy with one document per session, embedded ChromaDB-style (truncated) and ranked by
/// cosine: `raw-session-all`, `raw-session-user` and `seci-extract` differ only in the document
/// and in what a retrieved session hands the reader.
pub struct SessionDocs {
    name: &'static str,
    /// The text embedded for a session (empty: the session is left out).
    document: fn(&HSession) -> String,
    /// What a retrieved session hands the reader, given its document.
    unit: fn(&HSession, String) -> Unit,
    embeddings: Embeddings,
    /// The current haystack: (session id, vector), and each session's unit.
    docs: Vec<(String, Vec<f32>)>,
    units: Vec<Unit>,
}

impl SessionDocs {
    pub fn new(
        name: &'static str,
        document: fn(&HSession) -> String,
        unit: fn(&HSession, String) -> Unit,
        embeddings: Embeddings,
    ) -> Self {
        Self {
            name,
            document,
            unit,
            embeddings,
            docs: Vec::new(),
            units: Vec::new(),
        }
    }

    /// `raw-session-all`.
    pub fn raw_all(embeddings: Embeddings) -> Self {
        Self::new(
            "raw-session-all",
            render_all,
            whole_session_unit,
            embeddings,
        )
    }

    /// `raw-session-user`.
    pub fn raw_user(embeddings: Embeddings) -> Self {
        Self::new("raw-session-user", render_user, user_turns_unit, embeddings)
    }
}

/// The units of the `k` best documents for `query`.
pub(crate) fn top_units(
    query: &[f32],
    docs: &[(String, Vec<f32>)],
    units: &[Unit],
    k: usize,
) -> Vec<Unit> {
    rank_by_cosine(query, docs)
        .into_iter()
        .take(k)
        .filter_map(|(id, _)| units.iter().find(|u| u.session == id).cloned())
        .collect()
}

impl Strategy for SessionDocs {
    fn name(&self) -> &'static str {
        self.name
    }

    fn index(&mut self, case: &Case) -> Result<(), BenchError> {
        // Sessions whose document is empty (no user text for raw-session-user) are left out.
        let (texts, units): (Vec<String>, Vec<Unit>) = case
            .sessions
            .iter()
            .map(|s| ((self.document)(s), s))
            .filter(|(doc, _)| !doc.is_empty())
            .map(|(doc, s)| (doc.clone(), (self.unit)(s, doc)))
            .unzip();
        self.units = units;
        let vectors = self.embeddings.truncated(&texts)?;
        self.docs = self
            .units
            .iter()
            .map(|u| u.session.clone())
            .zip(vectors)
            .collect();
        Ok(())
    }

    fn rank(&mut self, case: &Case, k: usize) -> Result<Vec<Unit>, BenchError> {
        let q = self
            .embeddings
            .truncated(std::slice::from_ref(&case.question))?;
        Ok(top_units(&q[0], &self.docs, &self.units, k))
    }

    fn embedded_texts(&self) -> usize {
        self.embeddings.misses()
    }
}
