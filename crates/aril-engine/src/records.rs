//! Memories as clients read them (the Mem0 shape that `aril serve`, MCP and the Python package
//! all return): one record per memory, whether the memory is a turn and its later versions, or a
//! card and the cards that superseded it (ids `c_…`). Reading, updating, deleting and tracing a
//! memory by id goes through here, so every adapter answers the same.
//!
//! Every call takes who may see what (`access`, true for a user id the caller may read): a memory
//! of another user is reported as missing, not as forbidden, so its existence does not leak.

use aril_core::{
    Card, CardId, Condition, METADATA_RESERVED_KEY, Metadata, Role, ScopeFilter, Turn, TurnId,
};
use chrono::{DateTime, SubsecRound, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::{CardMemory, DeleteReport, Engine, EngineError, MemoryEdit, MemoryView};

/// Who may see a memory: true for the user ids the caller may read.
pub type Access<'a> = &'a dyn Fn(&str) -> bool;

/// A memory as it stands now.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = Memory))]
pub struct MemoryRecord {
    /// The memory's id: its first version's turn id (or card id).
    pub id: String,
    /// Its current text.
    pub memory: String,
    pub user_id: String,
    pub agent_id: Option<String>,
    pub run_id: Option<String>,
    /// Who said it (a turn memory); none for a card, which may draw on several turns.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub metadata: Option<Value>,
    pub categories: Vec<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// From when it no longer holds (it was forgotten): recall asked from then on leaves it out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub valid_to: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f32>,
}

impl MemoryRecord {
    /// A turn memory's record.
    pub fn from_view(v: MemoryView) -> Self {
        let t = v.current;
        Self {
            id: v.id.0,
            created_at: v.created,
            updated_at: t.ingest_time,
            memory: t.turn.text,
            user_id: t.turn.scope.user_id,
            agent_id: t.turn.scope.agent_id,
            run_id: t.turn.scope.run_id,
            role: Some(t.turn.role),
            valid_to: t.turn.lifecycle.valid_to,
            metadata: t.turn.metadata.map(Value::from),
            categories: Vec::new(),
            score: None,
        }
    }

    /// A card memory as it stands now: its newest card's text and topics, dated by the turns
    /// its first and newest cards came from. Its metadata is what clients attached to the turns
    /// the newest card came from (merged), with aril's details of the card (kind, entities,
    /// topics, time, source turns, card id) under the reserved key `aril`.
    fn from_cards(engine: &Engine, memory: &CardMemory) -> Result<Option<Self>, EngineError> {
        let (Some(first), Some(card)) = (memory.versions.first(), memory.current()) else {
            return Ok(None);
        };
        let sources = engine.turns(&card.source_turns)?;
        let mut metadata =
            Metadata::merged(sources.iter().filter_map(|t| t.turn.metadata.as_ref()))
                .map(|m| m.as_map().clone())
                .unwrap_or_default();
        metadata.insert(
            METADATA_RESERVED_KEY.into(),
            serde_json::json!({
                "type": card.kind,
                "entities": card.entities,
                "topics": card.topics,
                "time": card.time,
                "source_turns": card.source_turns,
                "card_id": card.id,
            }),
        );
        Ok(Some(Self {
            id: memory.id.0.clone(),
            memory: card.text.clone(),
            user_id: card.scope.user_id.clone(),
            agent_id: card.scope.agent_id.clone(),
            run_id: card.scope.run_id.clone(),
            role: None,
            metadata: Some(Value::Object(metadata)),
            categories: card.topics.clone(),
            created_at: said_at(engine, first)?,
            updated_at: latest(&sources),
            valid_to: card.valid_to,
            score: None,
        }))
    }
}

/// One version in a memory's history (the shape of Mem0's history entries).
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HistoryEntry {
    /// The version's own turn id (or card id).
    pub id: String,
    pub memory_id: String,
    /// From 1.
    pub version: u32,
    pub old_memory: Option<String>,
    pub new_memory: String,
    /// `ADD` for the first version; then `UPDATE` (a new text, metadata or expiry), `FORGET`
    /// (the same text, no longer holding from `valid_to`) or `RESTORE` (holding again).
    pub event: &'static str,
    pub user_id: String,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    /// What the version carried (a turn memory's; none for a card's).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub metadata: Option<Metadata>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Since when what this version says holds (valid time; `updated_at` is when aril learned
    /// it): when it was said, carried over by later versions of the same text.
    pub valid_from: DateTime<Utc>,
    /// Until when it held, as this version knew it: a forgetting's time, else when a later
    /// version with another text begins; none while it holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub valid_to: Option<DateTime<Utc>>,
    pub is_deleted: bool,
}

/// What deleting one memory removed: a turn memory's turns (and what they left behind), or a
/// card memory's cards.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Deletion {
    Turns(DeleteReport),
    Cards { cards: u64 },
}

impl Deletion {
    /// The memory's versions that were removed.
    pub fn versions(&self) -> u64 {
        match self {
            Deletion::Turns(report) => report.turns,
            Deletion::Cards { cards } => *cards,
        }
    }
}

/// When the newest turn a card came from was said (else stored); now when none is left.
fn said_at(engine: &Engine, card: &Card) -> Result<DateTime<Utc>, EngineError> {
    Ok(latest(&engine.turns(&card.source_turns)?))
}

/// When the newest of these turns was said (else stored); now when there is none.
fn latest(turns: &[Turn]) -> DateTime<Utc> {
    turns
        .iter()
        .map(|t| t.turn.event_time.unwrap_or(t.ingest_time))
        .max()
        .unwrap_or_else(Utc::now)
}

/// Card memory ids are card ids (`c_…`); every other id is a turn memory's.
fn is_card(id: &str) -> bool {
    id.starts_with("c_")
}

/// The memory view of a turn memory's versions (first to newest).
fn view(versions: Vec<Turn>) -> Option<MemoryView> {
    let first = versions.first()?;
    let (id, created) = (
        first.id.clone(),
        first.turn.event_time.unwrap_or(first.ingest_time),
    );
    versions.into_iter().last().map(|current| MemoryView {
        id,
        current,
        created,
    })
}

impl Engine {
    /// The card memory with this id (any of its versions' ids), if the caller may see it.
    fn card_versions(&self, id: &str, access: Access) -> Result<CardMemory, EngineError> {
        self.card_memory(&CardId(id.to_string()))?
            .filter(|m| m.versions.first().is_some_and(|c| access(&c.scope.user_id)))
            .ok_or_else(|| EngineError::UnknownMemory(id.to_string()))
    }

    /// A turn memory's versions, first to newest, if the caller may see it.
    fn turn_versions(&self, id: &str, access: Access) -> Result<Vec<Turn>, EngineError> {
        self.memory(&TurnId(id.to_string()))?
            .filter(|v| v.first().is_some_and(|t| access(&t.turn.scope.user_id)))
            .ok_or_else(|| EngineError::UnknownMemory(id.to_string()))
    }

    /// One memory by id, as it stands now.
    pub fn record(&self, id: &str, access: Access) -> Result<MemoryRecord, EngineError> {
        let found = if is_card(id) {
            MemoryRecord::from_cards(self, &self.card_versions(id, access)?)?
        } else {
            view(self.turn_versions(id, access)?).map(MemoryRecord::from_view)
        };
        found.ok_or_else(|| EngineError::UnknownMemory(id.to_string()))
    }

    /// A page of a scope's memories as they stand now, oldest first, and how many it has; with
    /// a condition, of those that meet it (and how many do).
    pub fn record_page(
        &self,
        filter: &ScopeFilter,
        condition: Option<&Condition>,
        offset: u64,
        limit: u64,
    ) -> Result<(Vec<MemoryRecord>, u64), EngineError> {
        let Some(condition) = condition else {
            let (turns, total) = self.list_memories(filter, offset, limit)?;
            let records = self.memory_views(turns)?;
            return Ok((
                records.into_iter().map(MemoryRecord::from_view).collect(),
                total,
            ));
        };
        // The facts of the current turns inside the condition's span of creation times are read
        // without their text and tested; only the page's turns are read whole.
        let met: Vec<TurnId> = self
            .store
            .current_turn_facts_meeting(filter, condition)?
            .into_iter()
            .map(|f| f.id)
            .collect();
        let total = met.len() as u64;
        let page: Vec<TurnId> = met
            .into_iter()
            .skip(usize::try_from(offset).unwrap_or(usize::MAX))
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .collect();
        let records = self.memory_views(self.turns(&page)?)?;
        Ok((
            records.into_iter().map(MemoryRecord::from_view).collect(),
            total,
        ))
    }

    /// Writes the memory's next version; returns the memory as it now stands. A card memory
    /// takes new text only: its metadata is that of the turns it was written from.
    pub fn update_record(
        &mut self,
        id: &str,
        edit: &MemoryEdit,
        access: Access,
    ) -> Result<MemoryRecord, EngineError> {
        if !is_card(id) {
            let mut all = self.turn_versions(id, access)?;
            all.push(self.update_memory(&TurnId(id.to_string()), edit)?);
            return view(all)
                .map(MemoryRecord::from_view)
                .ok_or_else(|| EngineError::UnknownMemory(id.to_string()));
        }
        if edit.metadata.is_some() {
            return Err(aril_core::InvalidInput(
                "a card memory's metadata is that of the turns it was written from: update those \
                 turns' memories, or send only the text"
                    .into(),
            )
            .into());
        }
        let memory = self.card_versions(id, access)?;
        self.check_card_mutable(id, &memory)?;
        let Some(text) = edit.text.as_deref() else {
            return Err(aril_core::InvalidInput(
                "an update of a card memory needs the new text".into(),
            )
            .into());
        };
        let memory = self.update_card_memory(&memory.id, text)?;
        MemoryRecord::from_cards(self, &memory)?
            .ok_or_else(|| EngineError::UnknownMemory(id.to_string()))
    }

    /// Deletes a memory with every version, from every file.
    pub fn delete_record(&mut self, id: &str, access: Access) -> Result<Deletion, EngineError> {
        if is_card(id) {
            let memory = self.card_versions(id, access)?;
            let cards = self.delete_card_memory(&memory.id)?;
            return Ok(Deletion::Cards { cards });
        }
        self.turn_versions(id, access)?;
        Ok(Deletion::Turns(
            self.delete_memory(&TurnId(id.to_string()))?,
        ))
    }

    /// Every version of a memory, first to newest.
    pub fn record_history(
        &self,
        id: &str,
        access: Access,
    ) -> Result<Vec<HistoryEntry>, EngineError> {
        if is_card(id) {
            return self.card_history(&self.card_versions(id, access)?);
        }
        let all = self.turn_versions(id, access)?;
        let memory_id = all.first().map(|t| t.id.0.clone()).unwrap_or_default();
        let stated: Vec<Stated> = all
            .iter()
            .map(|t| Stated {
                text: &t.turn.text,
                said: t.turn.event_time.unwrap_or(t.ingest_time),
                valid_to: t.turn.lifecycle.valid_to,
            })
            .collect();
        let validity = validity(&stated);
        let mut previous: Option<String> = None;
        Ok(all
            .iter()
            .zip(validity)
            .zip(1..)
            .map(|((t, v), version)| HistoryEntry {
                id: t.id.0.clone(),
                memory_id: memory_id.clone(),
                version,
                old_memory: previous.replace(t.turn.text.clone()),
                new_memory: t.turn.text.clone(),
                event: v.event,
                user_id: t.turn.scope.user_id.clone(),
                role: Some(t.turn.role),
                metadata: t.turn.metadata.clone(),
                created_at: t.turn.event_time.unwrap_or(t.ingest_time),
                updated_at: t.ingest_time,
                valid_from: v.from,
                valid_to: v.to,
                is_deleted: false,
            })
            .collect())
    }

    /// Every card of a card memory, first to newest, as history entries.
    fn card_history(&self, memory: &CardMemory) -> Result<Vec<HistoryEntry>, EngineError> {
        let mut said = Vec::with_capacity(memory.versions.len());
        for card in &memory.versions {
            said.push(said_at(self, card)?);
        }
        let stated: Vec<Stated> = memory
            .versions
            .iter()
            .zip(&said)
            .map(|(card, at)| Stated {
                text: &card.text,
                said: card.valid_from.unwrap_or(*at),
                valid_to: card.valid_to,
            })
            .collect();
        let validity = validity(&stated);
        let mut previous: Option<String> = None;
        Ok(memory
            .versions
            .iter()
            .zip(said)
            .zip(validity)
            .zip(1..)
            .map(|(((card, at), v), version)| HistoryEntry {
                id: card.id.0.clone(),
                memory_id: memory.id.0.clone(),
                version,
                old_memory: previous.replace(card.text.clone()),
                new_memory: card.text.clone(),
                event: v.event,
                user_id: card.scope.user_id.clone(),
                role: None,
                metadata: None,
                created_at: at,
                updated_at: at,
                valid_from: v.from,
                valid_to: v.to,
                is_deleted: false,
            })
            .collect())
    }

    /// Marks a memory as no longer holding from `at` (default: now), or, with `None` for `at`
    /// and `restore`, as holding again: a new version with the same text (and metadata) that
    /// says so, so the history keeps what was believed when. Recall asked from that time on
    /// leaves the memory out; listings show it with its `valid_to`. Refused for an immutable
    /// memory, and a restore of a memory that holds.
    pub fn set_record_validity(
        &mut self,
        id: &str,
        valid_to: Option<DateTime<Utc>>,
        access: Access,
    ) -> Result<MemoryRecord, EngineError> {
        // To the microsecond, as both stores keep times: what is returned is what is stored.
        let valid_to = valid_to.map(|t| t.trunc_subsecs(6));
        let holds = |current: Option<DateTime<Utc>>| {
            if valid_to.is_none() && current.is_none() {
                return Err(EngineError::InvalidInput(aril_core::InvalidInput(format!(
                    "memory {id} was not forgotten: there is nothing to restore"
                ))));
            }
            Ok(())
        };
        if !is_card(id) {
            let all = self.turn_versions(id, access)?;
            holds(all.last().and_then(|t| t.turn.lifecycle.valid_to))?;
            let edit = MemoryEdit {
                valid_to: Some(valid_to),
                ..MemoryEdit::default()
            };
            return self.update_record(id, &edit, access);
        }
        let memory = self.card_versions(id, access)?;
        holds(memory.current().and_then(|c| c.valid_to))?;
        self.check_card_mutable(id, &memory)?;
        let memory = self.set_card_validity(&memory.id, valid_to)?;
        MemoryRecord::from_cards(self, &memory)?
            .ok_or_else(|| EngineError::UnknownMemory(id.to_string()))
    }

    /// Refuses a change to a card memory written from an immutable memory's turns.
    fn check_card_mutable(&self, id: &str, memory: &CardMemory) -> Result<(), EngineError> {
        let sources = memory.current().map(|c| c.source_turns.clone());
        if self
            .turns(&sources.unwrap_or_default())?
            .iter()
            .any(|t| t.turn.lifecycle.immutable)
        {
            return Err(EngineError::ImmutableMemory(id.to_string()));
        }
        Ok(())
    }
}

/// A version as its validity is worked out: its text, since when it was said, and the end its
/// own forgetting gave it.
struct Stated<'a> {
    text: &'a str,
    said: DateTime<Utc>,
    valid_to: Option<DateTime<Utc>>,
}

/// A version's validity interval and the event that wrote it.
struct Validity {
    from: DateTime<Utc>,
    to: Option<DateTime<Utc>>,
    event: &'static str,
}

/// The validity of each version of a memory (first to newest). A version holds from when its
/// text was first said (a later version of the same text only changes what is known about it),
/// until its own forgetting, else until the next version with another text begins.
fn validity(versions: &[Stated]) -> Vec<Validity> {
    let mut from: Vec<DateTime<Utc>> = Vec::with_capacity(versions.len());
    for (i, v) in versions.iter().enumerate() {
        let start = match i.checked_sub(1) {
            Some(p) if versions[p].text == v.text => from[p],
            _ => v.said,
        };
        from.push(start);
    }
    versions
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let replaced = versions[i + 1..]
                .iter()
                .zip(&from[i + 1..])
                .find(|(later, _)| later.text != v.text)
                .map(|(_, start)| *start);
            let event = match i.checked_sub(1).map(|p| &versions[p]) {
                None => "ADD",
                Some(p) if p.text != v.text => "UPDATE",
                Some(p) if v.valid_to.is_some() && v.valid_to != p.valid_to => "FORGET",
                Some(p) if v.valid_to.is_none() && p.valid_to.is_some() => "RESTORE",
                Some(_) => "UPDATE",
            };
            Validity {
                from: from[i],
                to: v.valid_to.or(replaced),
                event,
            }
        })
        .collect()
}
