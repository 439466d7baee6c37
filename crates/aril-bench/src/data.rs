//! What a strategy may see: a question and its haystack. Built from the benchmark files through
//! `aril-datasets`' gold-free readers (LoCoMo, LongMemEval) or this module's own (HotpotQA).

use std::path::Path;

use aril_core::Role;
use aril_engine::datasets::{locomo, longmemeval};
use serde::Deserialize;

use crate::BenchError;

/// One turn (or paragraph) of a haystack.
#[derive(Debug, Clone)]
pub struct HTurn {
    /// The source's id: LoCoMo `D1:3`, LongMemEval `session:index`, HotpotQA paragraph id.
    pub id: String,
    pub role: Role,
    pub speaker: Option<String>,
    pub text: String,
}

/// A session of a haystack.
#[derive(Debug, Clone)]
pub struct HSession {
    pub id: String,
    /// The date as the source writes it.
    pub date: Option<String>,
    pub turns: Vec<HTurn>,
}

/// A question with everything a strategy may use.
#[derive(Debug, Clone)]
pub struct Case {
    pub id: String,
    pub question: String,
    pub question_date: Option<String>,
    /// Cases with the same key share a haystack (LoCoMo: one conversation, many questions), so a
    /// strategy may index it once.
    pub haystack_key: String,
    pub sessions: std::sync::Arc<Vec<HSession>>,
}

#[cfg(test)]
impl Case {
    /// A case with no haystack, for scoring tests: only its id matters to the scorers.
    pub(crate) fn empty(id: &str) -> Self {
        Case {
            id: id.into(),
            question: format!("question {id}"),
            question_date: None,
            haystack_key: "h".into(),
            sessions: Default::default(),
        }
    }
}

/// LongMemEval: one case per question, its own haystack.
pub fn longmemeval(path: &Path) -> Result<Vec<Case>, BenchError> {
    let questions = longmemeval::read(path)?;
    Ok(questions
        .into_iter()
        .map(|q| {
            let mut sessions: Vec<HSession> = q
                .session_ids
                .iter()
                .enumerate()
                .map(|(i, id)| HSession {
                    id: id.clone(),
                    date: q.session_dates.get(i).cloned(),
                    turns: Vec::new(),
                })
                .collect();
            for t in q.haystack.turns {
                let session = t.session.clone().unwrap_or_default();
                if let Some(s) = sessions.iter_mut().find(|s| s.id == session) {
                    s.turns.push(HTurn {
                        id: t.source_id.clone().unwrap_or_default(),
                        role: t.role,
                        speaker: None,
                        text: t.text,
                    });
                }
            }
            Case {
                haystack_key: q.question_id.clone(),
                id: q.question_id,
                question: q.question,
                question_date: q.question_date.map(|d| d.to_rfc3339()),
                sessions: std::sync::Arc::new(sessions),
            }
        })
        .collect())
}

/// LoCoMo: one case per question; the questions of a conversation share its haystack. Question
/// texts are read here, never answers or evidence.
pub fn locomo(path: &Path) -> Result<Vec<Case>, BenchError> {
    let samples = locomo::read_with_questions(path)?;
    let mut cases = Vec::new();
    for locomo::ConversationWithQuestions {
        conversation: conv,
        questions,
    } in samples
    {
        let mut sessions: Vec<HSession> = Vec::new();
        for t in conv.turns {
            let sid = t.session.clone().unwrap_or_default();
            if sessions.last().is_none_or(|s| s.id != sid) {
                sessions.push(HSession {
                    id: sid,
                    date: t.event_time.map(|d| d.to_rfc3339()),
                    turns: Vec::new(),
                });
            }
            if let Some(s) = sessions.last_mut() {
                s.turns.push(HTurn {
                    id: t.source_id.clone().unwrap_or_default(),
                    role: t.role,
                    speaker: t.speaker.clone(),
                    text: t.text,
                });
            }
        }
        let sessions = std::sync::Arc::new(sessions);
        for (i, question) in questions.into_iter().enumerate() {
            cases.push(Case {
                id: format!("{}#{}", conv.id, i),
                question,
                question_date: None,
                haystack_key: conv.id.clone(),
                sessions: sessions.clone(),
            });
        }
    }
    Ok(cases)
}

/// HotpotQA (distractor setting) in either published form: one JSON object per line
/// (`question_id`, `question_text`, `contexts` of `id`, `title`, `paragraph_text`: the form of
/// `../shared/data/hotpotqa`), or HotpotQA's own JSON array (`_id`, `question`, `context` as
/// `[title, [sentence, ...]]` pairs), where a paragraph's id is its position in `context`
/// ([`read_hotpotqa`]). Each paragraph is a one-turn session.
pub fn hotpotqa(path: &Path) -> Result<Vec<Case>, BenchError> {
    #[derive(Deserialize)]
    struct Line {
        question_id: String,
        question_text: String,
        contexts: Vec<Paragraph>,
    }
    #[derive(Deserialize)]
    struct Paragraph {
        id: String,
        title: String,
        paragraph_text: String,
    }
    #[derive(Deserialize)]
    struct Question {
        #[serde(rename = "_id")]
        id: String,
        question: String,
        context: Vec<(String, Vec<String>)>,
    }
    // A question's case from its id, question and paragraphs (id, title, text).
    let case = |id: String, question: String, paragraphs: Vec<(String, String, String)>| {
        let sessions = paragraphs
            .into_iter()
            .map(|(pid, title, body)| HSession {
                id: pid.clone(),
                date: None,
                turns: vec![HTurn {
                    id: pid,
                    role: Role::User,
                    speaker: None,
                    text: format!("{title}: {body}"),
                }],
            })
            .collect();
        Case {
            haystack_key: id.clone(),
            id,
            question,
            question_date: None,
            sessions: std::sync::Arc::new(sessions),
        }
    };
    Ok(match read_hotpotqa::<Line, Question>(path)? {
        HotpotFile::Lines(lines) => lines
            .into_iter()
            .map(|l| {
                let paragraphs = l
                    .contexts
                    .into_iter()
                    .map(|p| (p.id, p.title, p.paragraph_text))
                    .collect();
                case(l.question_id, l.question_text, paragraphs)
            })
            .collect(),
        HotpotFile::Original(questions) => questions
            .into_iter()
            .map(|q| {
                let paragraphs = q
                    .context
                    .into_iter()
                    .enumerate()
                    // HotpotQA's sentences carry their own leading spaces.
                    .map(|(i, (title, sentences))| (i.to_string(), title, sentences.concat()))
                    .collect();
                case(q.id, q.question, paragraphs)
            })
            .collect(),
    })
}

/// A HotpotQA file's records in the form it is written in: one JSON object per line (`L`), or
/// HotpotQA's own JSON array (`O`), told apart by the first character. The case loader and the
/// gold loader each read the fields they may see.
pub(crate) enum HotpotFile<L, O> {
    Lines(Vec<L>),
    Original(Vec<O>),
}

pub(crate) fn read_hotpotqa<L, O>(path: &Path) -> Result<HotpotFile<L, O>, BenchError>
where
    L: serde::de::DeserializeOwned,
    O: serde::de::DeserializeOwned,
{
    let text = crate::read_text(path)?;
    if text.trim_start().starts_with('[') {
        crate::parse_json(path, &text).map(HotpotFile::Original)
    } else {
        crate::json_lines(path, &text).map(HotpotFile::Lines)
    }
}
