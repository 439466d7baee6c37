//! One closed segment to cards: build the prompt and the per-segment schema, ask once (with one
//! repair round inside `complete_json`), check every label and date, and map the reply back to
//! cards with stable ids and the merged disambiguation state.

use aril_core::{
    Card, CardId, CardKind, CardTime, Segment, Turn, TurnId, parse_calendar_date as parse_date,
    short_hash,
};
use aril_llm::{ChatModel, JsonSpec, LlmError, Purpose, complete_json};
use chrono::{DateTime, Utc};

use crate::prompt::{messages, recent_within, summary_messages};
use crate::schema::{KINDS, Reply, labels, reply_schema};
use crate::{EncoderState, Guidance};

/// A recent card the encoder may supersede.
#[derive(Debug, Clone)]
pub struct RecentCard {
    pub id: CardId,
    pub kind: CardKind,
    pub text: String,
}

/// Budgets of one encoding call.
#[derive(Debug, Clone)]
pub struct EncodeConfig {
    /// o200k tokens the disambiguation state may take in the prompt.
    pub state_budget: usize,
    /// o200k tokens the recent-card digest may take.
    pub recent_budget: usize,
    /// Cards per segment at most.
    pub max_cards: usize,
    /// Reply tokens at most.
    pub max_tokens: u32,
    /// Ablation (the paper's "summaries instead of cards"): one untyped summary per segment,
    /// stored as a `fact` card citing every turn, with no entities, topics, dates or state.
    pub summaries: bool,
    /// What the application asks of these cards (for one write; empty by default).
    pub guidance: Guidance,
}

impl Default for EncodeConfig {
    fn default() -> Self {
        Self {
            state_budget: 300,
            recent_budget: 600,
            max_cards: 12,
            max_tokens: 2048,
            summaries: false,
            guidance: Guidance::default(),
        }
    }
}

/// What one segment's encoding produced.
#[derive(Debug, Clone)]
pub struct Encoded {
    pub cards: Vec<Card>,
    /// The state for the next segment (merged and cut to its budget).
    pub state: EncoderState,
    /// Model calls it took (1, or 2 after a repair).
    pub calls: u32,
}

/// Everything the schema cannot say: labels in range, real dates, an end not before the start.
fn check(reply: &Reply, turns: usize, recent: usize) -> Result<(), String> {
    let turn_labels = labels('T', turns);
    let card_labels = labels('C', recent);
    for (i, c) in reply.cards.iter().enumerate() {
        let n = i + 1;
        if !KINDS.contains(&c.kind.as_str()) {
            return Err(format!("card {n} has unknown type {:?}", c.kind));
        }
        if c.text.trim().is_empty() {
            return Err(format!("card {n} has no text"));
        }
        if c.source_turns.is_empty() {
            return Err(format!("card {n} cites no source turn"));
        }
        if let Some(bad) = c.source_turns.iter().find(|l| !turn_labels.contains(l)) {
            return Err(format!(
                "card {n} cites turn {bad:?}, which is not in this segment (T1…T{turns})"
            ));
        }
        if let Some(bad) = c.supersedes.iter().find(|l| !card_labels.contains(l)) {
            return Err(format!(
                "card {n} supersedes {bad:?}, which is not a recent card"
            ));
        }
        if let Some(t) = &c.time {
            let start = parse_date(&t.start)
                .ok_or_else(|| format!("card {n} has a bad start date {:?}", t.start))?;
            if let Some(end) = &t.end {
                let end = parse_date(end)
                    .ok_or_else(|| format!("card {n} has a bad end date {end:?}"))?;
                if end < start {
                    return Err(format!("card {n} ends before it starts"));
                }
            }
        }
    }
    Ok(())
}

/// When the newest of the `sources` among `turns` was said (else stored): since when a card
/// written from them holds. `None` when it cites none of them.
fn said_at(turns: &[Turn], sources: &[TurnId]) -> Option<DateTime<Utc>> {
    turns
        .iter()
        .filter(|t| sources.contains(&t.id))
        .map(|t| t.turn.event_time.unwrap_or(t.ingest_time))
        .max()
}

fn kind_of(label: &str) -> Option<CardKind> {
    CardKind::parse(label)
}

/// Turns one closed segment into cards with one model call (two when the first reply needs a
/// repair). `turns` are the segment's turns in order. Fails, never returns an empty success, when
/// the reply stays unusable: the caller marks the segment failed and its turns stay searchable.
pub fn encode_segment(
    model: &dyn ChatModel,
    segment: &Segment,
    turns: &[Turn],
    state: &EncoderState,
    recent: &[RecentCard],
    config: &EncodeConfig,
) -> Result<Encoded, LlmError> {
    if turns.len() != segment.turns.len()
        || turns.iter().zip(&segment.turns).any(|(t, id)| &t.id != id)
    {
        return Err(LlmError::Config(format!(
            "the turns given do not match segment {}",
            segment.id
        )));
    }
    if config.summaries {
        return summarize_segment(model, segment, turns, state, config);
    }
    let recent = recent_within(recent, config.recent_budget);
    let shown_state = EncoderState::default().merged(state, config.state_budget);
    let schema = reply_schema(turns.len(), recent.len(), config.max_cards);
    let reply = complete_json::<Reply>(
        model,
        Purpose::Encode,
        messages(
            &segment.conversation,
            turns,
            &shown_state,
            recent,
            &config.guidance,
        ),
        JsonSpec {
            name: "memory_cards",
            schema: &schema,
        },
        config.max_tokens,
        |r| check(r, turns.len(), recent.len()),
    )?;
    let calls = reply.calls;
    let reply = reply.value;
    let index = |label: &str| label[1..].parse::<usize>().ok().map(|i| i - 1);
    let cards = reply
        .cards
        .into_iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let kind = kind_of(&c.kind)?;
            let text = c.text.trim().to_string();
            let time = c.time.and_then(|t| {
                Some(CardTime {
                    start: Some(parse_date(&t.start)?),
                    end: t.end.as_deref().and_then(parse_date),
                    granularity: t.granularity,
                })
            });
            let source_turns: Vec<TurnId> = c
                .source_turns
                .iter()
                .filter_map(|l| index(l).and_then(|i| segment.turns.get(i)).cloned())
                .collect();
            Some(Card {
                id: CardId(format!(
                    "c_{}",
                    short_hash(&[&segment.id.0, &i.to_string(), &text])
                )),
                valid_from: said_at(turns, &source_turns),
                valid_to: None,
                scope: segment.scope.clone(),
                kind,
                text,
                entities: c.entities,
                topics: c.topics,
                time,
                source_turns,
                segment: segment.id.clone(),
                supersedes: c
                    .supersedes
                    .iter()
                    .filter_map(|l| index(l).and_then(|i| recent.get(i)).map(|r| r.id.clone()))
                    .collect(),
            })
        })
        .collect();
    let learned = EncoderState {
        aliases: reply
            .state
            .aliases
            .into_iter()
            .map(|a| (a.alias, a.name))
            .collect(),
        open_references: reply.state.open_references,
    };
    Ok(Encoded {
        cards,
        state: state.merged(&learned, config.state_budget),
        calls,
    })
}

/// The summary ablation: one call, one summary card over the whole segment, the state passed on
/// unchanged.
fn summarize_segment(
    model: &dyn ChatModel,
    segment: &Segment,
    turns: &[Turn],
    state: &EncoderState,
    config: &EncodeConfig,
) -> Result<Encoded, LlmError> {
    #[derive(serde::Deserialize)]
    struct Summary {
        summary: String,
    }
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"summary": {"type": "string", "minLength": 1, "maxLength": 1200}},
        "required": ["summary"],
        "additionalProperties": false
    });
    let reply = complete_json::<Summary>(
        model,
        Purpose::Encode,
        summary_messages(&segment.conversation, turns, &config.guidance),
        JsonSpec {
            name: "segment_summary",
            schema: &schema,
        },
        config.max_tokens,
        |s| {
            if s.summary.trim().is_empty() {
                Err("the summary is empty".into())
            } else {
                Ok(())
            }
        },
    )?;
    let text = reply.value.summary.trim().to_string();
    Ok(Encoded {
        cards: vec![Card {
            id: CardId(format!(
                "c_{}",
                short_hash(&[&segment.id.0, "summary", &text])
            )),
            scope: segment.scope.clone(),
            kind: CardKind::Fact,
            text,
            entities: Vec::new(),
            topics: Vec::new(),
            time: None,
            valid_from: said_at(turns, &segment.turns),
            valid_to: None,
            source_turns: segment.turns.clone(),
            segment: segment.id.clone(),
            supersedes: Vec::new(),
        }],
        state: state.clone(),
        calls: reply.calls,
    })
}
