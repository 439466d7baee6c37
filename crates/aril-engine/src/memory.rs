//! Memories as users and agents edit them. Without an LLM a memory is a turn, and its id is the
//! turn's id. An update appends a new turn as the memory's next version: the old version stays
//! (hidden from recall and listings, shown by its history), so the store stays append-only. A
//! deletion removes every version and rebuilds what held them: the closed segments are replaced by
//! the same segments without those turns (with fresh vectors), open segments drop them, and the
//! lexical index, the vector index and the embedding cache lose every trace.

use std::collections::{HashMap, HashSet};

use aril_core::{
    Lifecycle, Metadata, NewTurn, Scope, ScopeFilter, Segment, Turn, TurnId, UnitId, tokens,
};
use aril_segment::Closed;
use aril_store::{DeleteReport, OpenSegmentRecord, RevisionRecord, TurnDeletion};
use chrono::{DateTime, Utc};

use crate::{Engine, EngineError};

/// A memory as it stands now.
#[derive(Debug, Clone)]
pub struct MemoryView {
    /// The memory's id: the turn id of its first version.
    pub id: TurnId,
    /// Its newest version.
    pub current: Turn,
    /// When its first version was said (else stored).
    pub created: DateTime<Utc>,
}

/// What an update of a memory changes; what it leaves out stays as the current version has it.
#[derive(Debug, Clone, Default)]
pub struct MemoryEdit {
    /// The new text.
    pub text: Option<String>,
    /// The new metadata (replacing the current version's whole).
    pub metadata: Option<Metadata>,
    /// The new expiry: `Some(None)` removes it.
    pub expires_at: Option<Option<DateTime<Utc>>>,
    /// From when the memory no longer holds (a forgetting): `Some(None)` says it holds again.
    pub valid_to: Option<Option<DateTime<Utc>>>,
    /// When the memory changed (default: now).
    pub at: Option<DateTime<Utc>>,
}

impl Engine {
    /// The memories the given turns hold now: each turn with its memory's id and first time.
    /// Turns that are not later versions are memories of their own.
    pub fn memory_views(&self, turns: Vec<Turn>) -> Result<Vec<MemoryView>, EngineError> {
        let ids: Vec<TurnId> = turns.iter().map(|t| t.id.clone()).collect();
        let later = self.store.memory_ids(&ids)?;
        let firsts: Vec<TurnId> = later.values().cloned().collect();
        let first_times: HashMap<TurnId, DateTime<Utc>> = self
            .store
            .turns(&firsts)?
            .into_iter()
            .map(|t| (t.id.clone(), t.turn.event_time.unwrap_or(t.ingest_time)))
            .collect();
        Ok(turns
            .into_iter()
            .map(|t| {
                let id = later.get(&t.id).cloned().unwrap_or_else(|| t.id.clone());
                let created = first_times
                    .get(&id)
                    .copied()
                    .unwrap_or(t.turn.event_time.unwrap_or(t.ingest_time));
                MemoryView {
                    id,
                    current: t,
                    created,
                }
            })
            .collect())
    }

    /// The versions of a memory, first to newest; `None` when no memory has this id (a later
    /// version's own turn id is not a memory id).
    pub fn memory(&self, id: &TurnId) -> Result<Option<Vec<Turn>>, EngineError> {
        let versions = self.store.memory_versions(id)?;
        if versions.is_empty() {
            return Ok(None);
        }
        Ok(Some(self.store.turns(&versions)?))
    }

    /// A page of a scope's memories as they stand now (each memory's newest version), in store
    /// order, and how many the scope has in all.
    pub fn list_memories(
        &self,
        filter: &aril_core::ScopeFilter,
        offset: u64,
        limit: u64,
    ) -> Result<(Vec<Turn>, u64), EngineError> {
        let (ids, total) = self.store.list_turn_ids(filter, offset, limit, true)?;
        Ok((self.store.turns(&ids)?, total))
    }

    /// The ids of all a scope's memories as they stand now (each memory's newest version's turn),
    /// in store order: one read, so a caller that pages through them with [`Engine::turns`] sees
    /// the scope as it was at this moment, however others write meanwhile.
    pub fn current_memory_ids(
        &self,
        filter: &aril_core::ScopeFilter,
    ) -> Result<Vec<TurnId>, EngineError> {
        Ok(self.store.list_turn_ids(filter, 0, u64::MAX, true)?.0)
    }

    /// Writes the next version of a memory and returns the new version's turn: the edit's text
    /// and metadata, each the current version's where the edit leaves it out. The new turn joins
    /// its conversation like any other (embedded, segmented, indexed); its time defaults to now,
    /// when the memory changed.
    pub fn update_memory(&mut self, id: &TurnId, edit: &MemoryEdit) -> Result<Turn, EngineError> {
        if edit.text.is_none()
            && edit.metadata.is_none()
            && edit.expires_at.is_none()
            && edit.valid_to.is_none()
        {
            return Err(aril_core::InvalidInput(
                "an update changes the text, the metadata, the expiry or the validity: give at \
                 least one"
                    .into(),
            )
            .into());
        }
        let versions = self.store.memory_versions(id)?;
        let (Some(first), Some(current)) = (versions.first(), versions.last()) else {
            return Err(EngineError::UnknownMemory(id.0.clone()));
        };
        let stored = self.store.turns(&[first.clone(), current.clone()])?;
        let (Some(first), Some(current)) = (stored.first(), stored.last()) else {
            return Err(EngineError::UnknownMemory(id.0.clone()));
        };
        if current.turn.lifecycle.immutable {
            return Err(EngineError::ImmutableMemory(id.0.clone()));
        }
        let version = versions.len() as u32 + 1;
        let source = first.turn.source_id.as_deref().unwrap_or(&id.0);
        let turn = NewTurn {
            text: edit
                .text
                .as_deref()
                .map_or_else(|| current.turn.text.clone(), |t| t.trim().to_string()),
            event_time: Some(edit.at.unwrap_or_else(Utc::now)),
            source_id: Some(format!("{source}#v{version}")),
            metadata: edit
                .metadata
                .clone()
                .or_else(|| current.turn.metadata.clone()),
            lifecycle: Lifecycle {
                expires_at: edit.expires_at.unwrap_or(current.turn.lifecycle.expires_at),
                immutable: false,
                // A new text is a new statement: it holds until something says otherwise.
                valid_to: edit.valid_to.unwrap_or(match edit.text {
                    Some(_) => None,
                    None => current.turn.lifecycle.valid_to,
                }),
            },
            ..current.turn.clone()
        };
        turn.validate()?;
        let new_id = turn.id();
        if self
            .store
            .existing_turns(std::slice::from_ref(&new_id))?
            .contains(&new_id)
        {
            return Err(aril_core::InvalidInput(format!(
                "memory {id} already has a version {version}: read it again and retry"
            ))
            .into());
        }
        let (scope, conversation) = (turn.scope.clone(), turn.conversation.clone());
        let mut open = self.store.open_segment(&scope, &conversation)?;
        let revision = RevisionRecord {
            memory: id.clone(),
            version,
            turn: new_id.clone(),
        };
        self.commit_batch(
            &scope,
            &conversation,
            &[(new_id.clone(), turn)],
            &mut open,
            false,
            vec![revision],
            &[],
        )?;
        self.index_committed(&[&scope.user_id])?;
        self.store
            .turns(std::slice::from_ref(&new_id))?
            .into_iter()
            .next()
            .ok_or(EngineError::UnknownMemory(new_id.0))
    }

    /// Deletes every memory that expired at or before `now` (each with all its versions, the same
    /// purge as [`Engine::delete_memory`]) and returns how many. Run on open and, by `aril
    /// serve`, periodically; recall and listings skip an expired memory before its sweep.
    pub fn sweep_expired(&mut self, now: DateTime<Utc>) -> Result<u64, EngineError> {
        let mut swept = 0;
        let mut tried: std::collections::HashSet<TurnId> = std::collections::HashSet::new();
        loop {
            let expired = self.store.expired_turns(now, 100)?;
            // A turn still listed after its memory was deleted would loop forever: stop instead.
            if expired.iter().all(|t| tried.contains(t)) {
                return Ok(swept);
            }
            tried.extend(expired.iter().cloned());
            let memories = self.store.memory_ids(&expired)?;
            for turn in expired {
                let memory = memories.get(&turn).cloned().unwrap_or(turn);
                match self.delete_memory(&memory) {
                    Ok(_) => swept += 1,
                    // Another writer swept it first (a shared store).
                    Err(EngineError::UnknownMemory(_)) => {}
                    Err(e) => return Err(e),
                }
            }
        }
    }

    /// Deletes a memory with all its versions, everywhere: store, segments, indexes and cache.
    /// When another writer advances an open segment holding the memory meanwhile (a shared
    /// store), the deletion is prepared again from what the store then holds.
    pub fn delete_memory(&mut self, id: &TurnId) -> Result<DeleteReport, EngineError> {
        self.deleting_again_on_conflict(|engine| {
            let versions = engine.store.memory_versions(id)?;
            if versions.is_empty() {
                return Err(EngineError::UnknownMemory(id.0.clone()));
            }
            engine.try_delete_turns(&versions)
        })
    }

    /// Deletes one session of a conversation in a scope: every memory said in it, each with
    /// all its versions (wherever they were stored), with the same purge as [`Self::delete_memory`].
    /// `session: None` is the conversation's turns that name no session.
    pub fn delete_session(
        &mut self,
        filter: &ScopeFilter,
        conversation: &str,
        session: Option<&str>,
    ) -> Result<DeleteReport, EngineError> {
        self.deleting_again_on_conflict(|engine| {
            let versions = engine.session_memories(filter, conversation, session)?;
            engine.try_delete_turns(&versions)
        })
    }

    /// The turns [`Self::delete_session`] would delete: each memory said in the session, with
    /// all its versions, in store order of first mention. An unknown session is an error.
    pub fn session_memories(
        &self,
        filter: &ScopeFilter,
        conversation: &str,
        session: Option<&str>,
    ) -> Result<Vec<TurnId>, EngineError> {
        let said = self.store.session_turns(filter, conversation, session)?;
        if said.is_empty() {
            return Err(EngineError::UnknownSession {
                conversation: conversation.to_string(),
                session: session.map(str::to_string),
            });
        }
        let memories = self.store.memory_ids(&said)?;
        let mut versions: Vec<TurnId> = Vec::new();
        let (mut memories_seen, mut taken) = (HashSet::new(), HashSet::new());
        for turn in &said {
            let memory = memories.get(turn).unwrap_or(turn);
            if !memories_seen.insert(memory.clone()) {
                continue;
            }
            for v in self.store.memory_versions(memory)? {
                if taken.insert(v.clone()) {
                    versions.push(v);
                }
            }
        }
        Ok(versions)
    }

    /// Runs a deletion, preparing it again when another writer advanced an open segment it
    /// touches meanwhile (a shared store).
    fn deleting_again_on_conflict(
        &mut self,
        mut delete: impl FnMut(&mut Self) -> Result<DeleteReport, EngineError>,
    ) -> Result<DeleteReport, EngineError> {
        let mut attempt = 1;
        loop {
            match delete(self) {
                Err(EngineError::Store(aril_store::StoreError::Conflict(what))) if attempt < 20 => {
                    tracing::debug!(%what, attempt, "another writer went first; deleting again");
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// Deletes the given turns (whole memories: every version of each) everywhere: store,
    /// segments (rebuilt without them), indexes and cache.
    fn try_delete_turns(&mut self, versions: &[TurnId]) -> Result<DeleteReport, EngineError> {
        let versions = versions.to_vec();
        let turns = self.store.turns(&versions)?;
        let holding = self.store.segments_holding(&versions)?;
        let mut replacements = Vec::new();
        let mut embeddings = Vec::new();
        for segment in &holding {
            if let Some(rebuilt) = self.without(segment, &versions)? {
                let (records, fresh) = self.segment_vectors(vec![rebuilt], &embeddings)?;
                replacements.extend(records);
                embeddings.extend(fresh);
            }
        }
        let mut conversations: Vec<(Scope, String)> = Vec::new();
        for t in &turns {
            let key = (t.turn.scope.clone(), t.turn.conversation.clone());
            if !conversations.contains(&key) {
                conversations.push(key);
            }
        }
        let mut open_segments = Vec::new();
        for (scope, conversation) in conversations {
            let mut read = self.store.open_segment(&scope, &conversation)?;
            if read.state.remove(&versions) {
                open_segments.push(OpenSegmentRecord {
                    scope,
                    conversation,
                    state: read.state,
                    read_version: read.version,
                });
            }
        }
        // The neighbours whose windows hold the deleted turns' words, windowed again after.
        let neighbours: Vec<TurnId> = aril_store::windows_touched(self.store.as_ref(), &versions)?
            .into_iter()
            .filter(|t| !versions.contains(t))
            .collect();
        let mut users: Vec<&str> = turns
            .iter()
            .map(|t| t.turn.scope.user_id.as_str())
            .collect();
        users.sort_unstable();
        users.dedup();
        for user in &users {
            self.search.deleting(user)?;
        }
        let deletion = self.store.delete_turns(TurnDeletion {
            turns: versions.clone(),
            segments: holding.iter().map(|s| s.id.clone()).collect(),
            replacements,
            embeddings,
            open_segments,
        });
        let report = match deletion {
            Ok(report) => report,
            Err(e) => {
                self.search.deletion_refused()?;
                return Err(e.into());
            }
        };
        let gone: Vec<UnitId> = versions
            .iter()
            .cloned()
            .map(UnitId::Turn)
            .chain(holding.iter().map(|s| UnitId::Segment(s.id.clone())))
            .collect();
        self.search
            .deleted_units(&*self.store, &users, &gone, &neighbours)?;
        for user in users {
            // The rebuilt segments' cards went with them.
            self.drop_card_index(user);
        }
        Ok(report)
    }

    /// A closed segment without the given turns, with the texts its vector is made from; `None`
    /// when no turn is left.
    fn without(
        &self,
        segment: &Segment,
        removed: &[TurnId],
    ) -> Result<Option<(Segment, Vec<String>)>, EngineError> {
        let left: Vec<TurnId> = segment
            .turns
            .iter()
            .filter(|t| !removed.contains(t))
            .cloned()
            .collect();
        if left.is_empty() {
            return Ok(None);
        }
        let tokens = self
            .store
            .turns(&left)?
            .iter()
            .map(|t| tokens::count(&t.rendered()) as u32)
            .sum();
        let closed = Closed {
            turns: left,
            reason: segment.reason,
            score: segment.boundary_score,
            tokens,
        };
        Ok(self
            .build_segments(&segment.scope, &segment.conversation, &[closed], &[])?
            .into_iter()
            .next())
    }
}
