//! seed 004's raw baselines (MemPalace's method and its all-turns variant): one document per
//! session, embedded as ChromaDB does (all-MiniLM-L6-v2 truncated to 256 word pieces), ranked by
//! cosine. They reproduce the truncation pitfall on purpose.
//!
//! - `raw-session-all`: every turn rendered `Role: content` (role capitalised), joined by newlines.
//! - `raw-session-user`: the user turns' contents joined by newlines; sessions without user text
//!   are left out.

use aril_core::{Role, render_line};

use super::{Embeddings, Strategy, Unit, rank_by_cosine};
use crate::BenchError;
use crate::data::{Case, HSession};

pub struct RawSession {
    users_only: bool,
    embeddings: Embeddings,
    /// The current haystack: (session id, vector), and each session's unit.
    docs: Vec<(String, Vec<f32>)>,
    units: Vec<Unit>,
}

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

pub(crate) fn session_unit(session: &HSession, text: String) -> Unit {
    Unit {
        session: session.id.clone(),
        turns: session.turns.iter().map(|t| t.id.clone()).collect(),
        text,
    }
}

impl RawSession {
    pub fn all(embeddings: Embeddings) -> Self {
        Self {
            users_only: false,
            embeddings,
            docs: Vec::new(),
            units: Vec::new(),
        }
    }

    pub fn user(embeddings: Embeddings) -> Self {
        Self {
            users_only: true,
            embeddings,
            docs: Vec::new(),
            units: Vec::new(),
        }
    }
}

impl Strategy for RawSession {
    fn name(&self) -> &'static str {
        if self.users_only {
            "raw-session-user"
        } else {
            "raw-session-all"
        }
    }

    fn index(&mut self, case: &Case) -> Result<(), BenchError> {
        self.units = case
            .sessions
            .iter()
            .map(|s| {
                let text = if self.users_only {
                    render_user(s)
                } else {
                    render_all(s)
                };
                session_unit(s, text)
            })
            .filter(|u| !u.text.is_empty())
            .collect();
        let texts: Vec<String> = self.units.iter().map(|u| u.text.clone()).collect();
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
        Ok(rank_by_cosine(&q[0], &self.docs)
            .into_iter()
            .take(k)
            .filter_map(|(id, _)| self.units.iter().find(|u| u.session == id).cloned())
            .collect())
    }

    fn embedded_texts(&self) -> usize {
        self.embeddings.misses()
    }
}
