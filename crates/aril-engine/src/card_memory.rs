//! Cards as memories users edit (the Mem0 API once an encoder writes cards). A card memory is a
//! supersession chain: its id is the chain's first card, its versions run from there to the card
//! nothing supersedes. An edit appends a new card that supersedes the newest version (the store
//! stays append-only and the old text stays in the history); a deletion removes every version.
//! The verbatim turns a card came from are not touched by either.

use std::collections::HashSet;

use aril_core::{Card, CardId, SegmentId, TurnId, short_hash};
use chrono::{DateTime, SubsecRound, Utc};

use crate::{Engine, EngineError};

/// A card memory: its id (the first version's) and every version, first to newest.
#[derive(Debug, Clone)]
pub struct CardMemory {
    pub id: CardId,
    pub versions: Vec<Card>,
}

impl CardMemory {
    /// The version that holds now.
    pub fn current(&self) -> Option<&Card> {
        self.versions.last()
    }
}

impl Engine {
    /// The card memory a card belongs to, whichever of its versions `id` names; `None` when no
    /// card has this id.
    pub fn card_memory(&self, id: &CardId) -> Result<Option<CardMemory>, EngineError> {
        let Some(mut card) = self.store.cards_by_id(std::slice::from_ref(id))?.pop() else {
            return Ok(None);
        };
        // Back to the first version: the first superseded card that still exists, repeatedly.
        let mut seen = HashSet::from([card.id.clone()]);
        loop {
            let earlier = self.store.cards_by_id(&card.supersedes)?;
            match earlier.into_iter().find(|c| !seen.contains(&c.id)) {
                Some(c) => {
                    seen.insert(c.id.clone());
                    card = c;
                }
                None => break,
            }
        }
        // Forward to the newest: the latest card superseding the current one, repeatedly.
        let mut versions = vec![card];
        let mut seen = HashSet::new();
        while let Some(last) = versions.last() {
            seen.insert(last.id.clone());
            let later = self.store.cards_superseding(&last.id)?;
            let Some(next) = later.into_iter().rev().find(|c| !seen.contains(c)) else {
                break;
            };
            match self.store.cards_by_id(&[next])?.pop() {
                Some(c) => versions.push(c),
                None => break,
            }
        }
        Ok(Some(CardMemory {
            id: versions[0].id.clone(),
            versions,
        }))
    }

    /// Writes `text` as the next version of a card memory: a new card like the newest version,
    /// with the new text, holding from now, superseding it (which closes the older version's
    /// validity). Returns the memory as it now stands.
    pub fn update_card_memory(
        &mut self,
        id: &CardId,
        text: &str,
    ) -> Result<CardMemory, EngineError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(EngineError::Config(
                "a memory's new text is empty: give the text it should hold".into(),
            ));
        }
        self.append_card_version(id, text, |newest| Card {
            text: text.to_string(),
            valid_from: Some(Utc::now().trunc_subsecs(6)),
            valid_to: None,
            ..newest
        })
    }

    /// Writes the next version of a card memory with the same content and a new end of its
    /// validity (`None`: it holds again). Returns the memory as it now stands.
    pub fn set_card_validity(
        &mut self,
        id: &CardId,
        valid_to: Option<DateTime<Utc>>,
    ) -> Result<CardMemory, EngineError> {
        let change = format!("valid_to {valid_to:?}");
        self.append_card_version(id, &change, |newest| Card { valid_to, ..newest })
    }

    /// Appends `next(newest)` as a new version superseding the newest (with a fresh id, made
    /// from the newest's id, `change` and the time).
    fn append_card_version(
        &mut self,
        id: &CardId,
        change: &str,
        next: impl FnOnce(Card) -> Card,
    ) -> Result<CardMemory, EngineError> {
        let mut memory = self
            .card_memory(id)?
            .ok_or_else(|| EngineError::UnknownMemory(id.0.clone()))?;
        let Some(newest) = memory.current().cloned() else {
            return Err(EngineError::UnknownMemory(id.0.clone()));
        };
        let now = Utc::now().to_rfc3339();
        let newest_id = newest.id.clone();
        let card = Card {
            id: CardId(format!("c_{}", short_hash(&[&newest_id.0, change, &now]))),
            supersedes: vec![newest_id],
            ..next(newest)
        };
        let vectors = self.card_vectors(std::slice::from_ref(&card))?;
        self.store
            .append_cards(std::slice::from_ref(&card), &vectors)?;
        self.drop_card_index(&card.scope.user_id);
        memory.versions.push(card);
        Ok(memory)
    }

    /// Deletes every version of a card memory; returns how many cards were removed.
    pub fn delete_card_memory(&mut self, id: &CardId) -> Result<u64, EngineError> {
        let memory = self
            .card_memory(id)?
            .ok_or_else(|| EngineError::UnknownMemory(id.0.clone()))?;
        let ids: Vec<CardId> = memory.versions.iter().map(|c| c.id.clone()).collect();
        let removed = self.store.delete_cards(&ids)?;
        if let Some(first) = memory.versions.first() {
            self.drop_card_index(&first.scope.user_id);
        }
        Ok(removed)
    }

    /// The closed segments holding any of `turns` that wait to be written into cards, oldest
    /// first.
    pub fn queued_segments_holding(&self, turns: &[TurnId]) -> Result<Vec<SegmentId>, EngineError> {
        let holding: HashSet<SegmentId> = self
            .store
            .segments_holding(turns)?
            .into_iter()
            .map(|s| s.id)
            .collect();
        Ok(self
            .store
            .queued_segments(usize::MAX, false)?
            .into_iter()
            .filter(|s| holding.contains(s))
            .collect())
    }

    /// The cards written from a segment, in store order.
    pub fn segment_cards(&self, segment: &SegmentId) -> Result<Vec<Card>, EngineError> {
        let Some(s) = self.store.segments(std::slice::from_ref(segment))?.pop() else {
            return Ok(Vec::new());
        };
        let ids = self.store.lookup_cards(
            &s.scope.as_filter(),
            &aril_store::CardLookup::Segment(segment.clone()),
        )?;
        Ok(self.store.cards_by_id(&ids)?)
    }
}
