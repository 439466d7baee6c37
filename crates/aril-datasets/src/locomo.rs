//! LoCoMo (`locomo10.json` format): an array of samples, each a two-person conversation in dated
//! sessions. Imported as one scope per sample (`user_id = sample_id`), one conversation, sessions
//! `session_N` with the session's date as every turn's event time. A shared image's `blip_caption`
//! is kept with its turn's text.

use std::collections::BTreeMap;
use std::path::Path;

use aril_core::{NewTurn, Role, Scope};
use serde::Deserialize;

use crate::{Conversation, DatasetError, parse_locomo_time, read_json};

#[derive(Deserialize)]
struct Sample {
    sample_id: String,
    conversation: BTreeMap<String, serde_json::Value>,
    /// The questions, read for their text only: no answer, evidence or category field is
    /// declared, so none is ever deserialized.
    #[serde(default)]
    qa: Option<Vec<QuestionText>>,
}

#[derive(Deserialize)]
struct QuestionText {
    question: String,
}

/// A conversation with the text of its questions, in the file's order; what a benchmark may
/// see of a sample (answers and evidence stay in the file, for the scorer alone).
#[derive(Debug, Clone)]
pub struct ConversationWithQuestions {
    pub conversation: Conversation,
    pub questions: Vec<String>,
}

#[derive(Deserialize)]
struct RawTurn {
    speaker: String,
    dia_id: String,
    text: String,
    #[serde(default)]
    blip_caption: Option<String>,
}

/// Reads the conversations of a LoCoMo file; `only` keeps the named sample ids (all when empty,
/// and an unknown name is an error).
pub fn read(path: &Path, only: &[String]) -> Result<Vec<Conversation>, DatasetError> {
    Ok(read_samples(path, only)?
        .into_iter()
        .map(|(conversation, _)| conversation)
        .collect())
}

/// Reads every conversation of a LoCoMo file with its questions' text, in one pass over the
/// file. A sample without a `qa` list is an error here (a benchmark needs questions).
pub fn read_with_questions(path: &Path) -> Result<Vec<ConversationWithQuestions>, DatasetError> {
    read_samples(path, &[])?
        .into_iter()
        .map(|(conversation, qa)| match qa {
            Some(qa) => Ok(ConversationWithQuestions {
                conversation,
                questions: qa.into_iter().map(|q| q.question).collect(),
            }),
            None => Err(DatasetError::Invalid {
                path: path.display().to_string(),
                message: format!("conversation {} has no qa list", conversation.id),
            }),
        })
        .collect()
}

/// A conversation with its sample's `qa` list as read (absent when the sample has none).
type ReadSample = (Conversation, Option<Vec<QuestionText>>);

/// The conversations of the file (those of `only`, or all) with each sample's `qa` as read.
fn read_samples(path: &Path, only: &[String]) -> Result<Vec<ReadSample>, DatasetError> {
    let samples: Vec<Sample> = read_json(path, "LoCoMo")?;
    let invalid = |message: String| DatasetError::Invalid {
        path: path.display().to_string(),
        message,
    };
    if let Some(missing) = only
        .iter()
        .find(|id| !samples.iter().any(|s| &s.sample_id == *id))
    {
        let known: Vec<&str> = samples.iter().map(|s| s.sample_id.as_str()).collect();
        return Err(invalid(format!(
            "no conversation {missing:?} in the file; it has {}",
            known.join(", ")
        )));
    }
    let mut out = Vec::new();
    for sample in samples {
        if !only.is_empty() && !only.contains(&sample.sample_id) {
            continue;
        }
        let scope = Scope::user(sample.sample_id.clone())
            .map_err(|e| invalid(format!("sample_id: {e}")))?;
        // session_N keys, in numeric order.
        let mut sessions: Vec<(u32, &str)> = sample
            .conversation
            .keys()
            .filter_map(|k| {
                let n = k.strip_prefix("session_")?;
                n.parse::<u32>().ok().map(|n| (n, k.as_str()))
            })
            .collect();
        sessions.sort();
        if sessions.is_empty() {
            return Err(invalid(format!(
                "conversation {} has no session_N entries",
                sample.sample_id
            )));
        }
        let mut turns = Vec::new();
        for (n, key) in sessions {
            let raw: Vec<RawTurn> = serde_json::from_value(sample.conversation[key].clone())
                .map_err(|e| invalid(format!("{} {key}: {e}", sample.sample_id)))?;
            let date_key = format!("{key}_date_time");
            let when = match sample.conversation.get(&date_key).and_then(|v| v.as_str()) {
                Some(s) => Some(
                    parse_locomo_time(s)
                        .map_err(|e| invalid(format!("{} {date_key}: {e}", sample.sample_id)))?,
                ),
                None => None,
            };
            for t in raw {
                let text = match &t.blip_caption {
                    Some(caption) if !caption.trim().is_empty() => {
                        format!("{}\n[shared an image: {caption}]", t.text)
                    }
                    _ => t.text,
                };
                turns.push(NewTurn {
                    scope: scope.clone(),
                    conversation: sample.sample_id.clone(),
                    session: Some(format!("session_{n}")),
                    role: Role::User,
                    speaker: Some(t.speaker),
                    text,
                    event_time: when,
                    source_id: Some(t.dia_id),
                    metadata: None,
                    lifecycle: Default::default(),
                });
            }
        }
        out.push((
            Conversation {
                scope,
                id: sample.sample_id,
                turns,
            },
            sample.qa,
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file(content: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(content.as_bytes()).unwrap();
        f
    }

    const SAMPLE: &str = r#"[{"sample_id": "c1", "qa": [{"question": "q", "answer": "SECRET", "evidence": ["D1:1"]}],
      "conversation": {"speaker_a": "A", "speaker_b": "B",
        "session_2_date_time": "2:00 pm on 9 May, 2023",
        "session_2": [{"speaker": "B", "dia_id": "D2:1", "text": "later"}],
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "look", "blip_caption": "a dog"}]}}]"#;

    #[test]
    fn sessions_in_order_with_dates_and_captions_and_no_gold() {
        let f = file(SAMPLE);
        let convs = read(f.path(), &[]).unwrap();
        assert_eq!(convs.len(), 1);
        let t = &convs[0].turns;
        assert_eq!(t[0].source_id.as_deref(), Some("D1:1"));
        assert_eq!(t[0].text, "look\n[shared an image: a dog]");
        assert_eq!(
            t[0].event_time.unwrap().to_rfc3339(),
            "2023-05-08T13:56:00+00:00"
        );
        assert_eq!(t[1].session.as_deref(), Some("session_2"));
        let dump = format!("{convs:?}");
        assert!(!dump.contains("SECRET"));
    }

    #[test]
    fn questions_are_read_with_their_conversation_and_without_answers() {
        let f = file(SAMPLE);
        let samples = read_with_questions(f.path()).unwrap();
        assert_eq!(samples.len(), 1);
        assert_eq!(samples[0].conversation.id, "c1");
        assert_eq!(samples[0].questions, vec!["q".to_string()]);
        assert!(!format!("{samples:?}").contains("SECRET"));
        let f = file(&SAMPLE.replace(
            r#""qa": [{"question": "q", "answer": "SECRET", "evidence": ["D1:1"]}],"#,
            "",
        ));
        assert_eq!(read(f.path(), &[]).unwrap().len(), 1);
        let err = read_with_questions(f.path()).unwrap_err().to_string();
        assert!(err.contains("conversation c1 has no qa list"), "{err}");
    }

    #[test]
    fn malformed_json_names_line_and_column() {
        let f = file("[\n{\"sample_id\": }");
        let err = read(f.path(), &[]).unwrap_err().to_string();
        assert!(err.contains(":2:"), "{err}");
        assert!(err.contains("malformed JSON"), "{err}");
    }

    #[test]
    fn wrong_format_and_unknown_conversation_are_clear() {
        let f = file(r#"[{"question_id": "x", "haystack_sessions": []}]"#);
        let err = read(f.path(), &[]).unwrap_err().to_string();
        assert!(err.contains("not a LoCoMo file"), "{err}");
        let f = file(SAMPLE);
        let err = read(f.path(), &["c9".into()]).unwrap_err().to_string();
        assert!(err.contains("no conversation \"c9\""), "{err}");
    }

    #[test]
    fn bad_session_date_is_an_error() {
        let f = file(&SAMPLE.replace("1:56 pm on 8 May, 2023", "sometime"));
        let err = read(f.path(), &[]).unwrap_err().to_string();
        assert!(err.contains("session_1_date_time"), "{err}");
    }
}
